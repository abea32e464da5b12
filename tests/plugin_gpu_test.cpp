// ssmcheck's CUDA implementation run as a plug-in (libssmcheck_cuda_plugin.so) through the C ABI
// alone: a campaign with async copies held, and the gate, must pass as `--backend cuda` does.
// gpu label: skips without a device (fails with SSMCHECK_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include "fuzz/campaign.h"
#include "plugin/plugin_backend.h"
#include "tests/cuda_test_support.h"
#include "tests/support/campaign_env.h"
#include "tests/support/shell.h"

namespace ssm {
namespace {

// Built-in paths, overridable where the binaries were moved (a packed GPU run: scripts/gpu-pack).
std::string env_or(const char* name, const char* built) {
  const char* v = std::getenv(name);
  return v && *v ? v : built;
}
const std::string kCuda = env_or("SSMCHECK_CUDA_PLUGIN", SSMCHECK_CUDA_PLUGIN);
const std::string kBin = env_or("SSMCHECK_BIN", SSMCHECK_BIN);
const std::string kTraces = env_or("SSMCHECK_FIXTURES_DIR", SSMCHECK_FIXTURES) + "/traces";

using PluginGpu = test::GpuTest;

TEST_F(PluginGpu, CudaPluginPassesACampaignWithAsyncCopiesHeld) {
  fuzz::CampaignOptions o;
  o.caps = Capabilities::everything();  // the CUDA plug-in declares SSMP_MAMBA2, SSMP_PLE and an async path
  o.seed = test::campaign_seed(20261130);
  o.cases = int(test::env_u64("SSMCHECK_CASES", 300));
  o.pause_async = true;
  o.backend_label = "plugin:" + kCuda;
  const fuzz::BackendFactory model = [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
  const fuzz::BackendFactory sut = [] {
    return std::unique_ptr<Backend>(new plugin::PluginBackend(plugin::PluginSpec::parse(kCuda)));
  };
  const fuzz::CampaignResult r = fuzz::run_campaign(o, model, sut);
  std::printf("%s", r.summary().c_str());
  EXPECT_FALSE(r.failed) << r.summary();
  EXPECT_FALSE(r.gave_up) << r.message;
  EXPECT_EQ(r.cases, o.cases);
  // the held async copies crossed the ABI (pause_async_copies answered 1 through it)
  EXPECT_TRUE(r.coverage.missing({"async reads deferred"}).empty()) << "no async read was deferred";
  // and the PLE carries crossed it: created, advanced, restored on a partial accept
  const auto ple = r.coverage.missing({"layers hosting a PLE carry", "a partial accept restoring a PLE carry"});
  EXPECT_TRUE(ple.empty()) << "never reached: " << ple.front();
}

TEST_F(PluginGpu, GateRunsTheCudaPlugin) {
  const auto s = test::sh(kBin + " gate --cases " +
                          std::to_string(test::env_u64("SSMCHECK_GATE_CASES", 300)) + " --backend " +
                          test::q("plugin:" + kCuda) + " --traces " + test::q(kTraces));
  std::printf("%s", s.out.c_str());
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("campaign.plugin:libssmcheck_cuda_plugin"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("skipped"), std::string::npos) << s.out;  // the PLE traces too (SSMP_PLE)
}

}  // namespace
}  // namespace ssm
