// Plug-ins (plugin/ssmcheck_plugin.h): ssmcheck's reference built as a plug-in agrees with the
// reference bit for bit through the C ABI alone, in campaigns over drawn presets, pools and h
// modes; a deliberate fault in it is caught and shrunk; bad plug-ins are refused with a message
// naming what is wrong, and from the command line with exit 2 and a verdict.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fuzz/campaign.h"
#include "plugin/plugin_backend.h"
#include "reference/reference_backend.h"
#include "tests/support/campaign_env.h"
#include "tests/support/shell.h"

namespace ssm {
namespace {

using test::q;
using test::sh;

const std::string kRef = SSMCHECK_REFERENCE_PLUGIN;
std::string bad(const std::string& name) {
  return std::string(SSMCHECK_BAD_PLUGIN_DIR) + "/libssmcheck_bad_plugin_" + name + ".so";
}

fuzz::BackendFactory reference() {
  return [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
}
fuzz::BackendFactory plugin(const std::string& spec) {
  return [spec] { return std::unique_ptr<Backend>(new plugin::PluginBackend(plugin::PluginSpec::parse(spec))); };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PluginSpec, SplitsPathAndOptionsAndRefusesMalformedOptions) {
  const auto s = plugin::PluginSpec::parse("/x/libmine.so,fault=a,k=v");
  EXPECT_EQ(s.path, "/x/libmine.so");
  EXPECT_EQ(s.options, "fault=a,k=v");
  EXPECT_EQ(s.label(), "plugin:libmine");
  EXPECT_EQ(plugin::PluginSpec::parse("a.so").options, "");
  EXPECT_NE(error_of([] { plugin::PluginSpec::parse(",k=v"); }).find("no path"), std::string::npos);
  EXPECT_NE(error_of([] { plugin::PluginSpec::parse("a.so,novalue"); }).find("'novalue' is not key=value"),
            std::string::npos);
  EXPECT_NE(error_of([] { plugin::PluginSpec::parse("a.so,k=v,"); }).find("'' is not key=value"), std::string::npos);
}

TEST(PluginLoad, NamesWhatIsWrongWithABadLibrary) {
  EXPECT_NE(error_of([] { plugin::load_plugin("/nonexistent/libx.so"); }).find("no such file"), std::string::npos);
  const std::string no_entry = error_of([] { plugin::load_plugin(bad("no_entry")); });
  EXPECT_NE(no_entry.find("does not export ssmcheck_plugin()"), std::string::npos) << no_entry;
  const std::string abi = error_of([] { plugin::load_plugin(bad("abi")); });
  EXPECT_NE(abi.find("ABI version 999; this ssmcheck speaks version 1"), std::string::npos) << abi;
  const std::string missing = error_of([] { plugin::load_plugin(bad("missing_call")); });
  EXPECT_NE(missing.find("required members not set: create_pool, alloc, release, prefill"), std::string::npos)
      << missing;
  const std::string not_elf = error_of([] { plugin::load_plugin(SSMCHECK_BIN); });  // an executable, not a library
  EXPECT_NE(not_elf.find("cannot be loaded"), std::string::npos) << not_elf;
}

TEST(PluginLoad, TheReferencePluginDeclaresItsOwnLegalityAndBitwise) {
  const plugin::PluginLibrary& lib = plugin::load_plugin(kRef);
  EXPECT_TRUE(lib.own_legality());
  EXPECT_TRUE(lib.bitwise());
  EXPECT_TRUE(lib.runs(LayerKind::mamba2));
  EXPECT_TRUE(lib.ple());
  EXPECT_NE(error_of([] { plugin::PluginBackend b(plugin::PluginSpec::parse(kRef + ",fault=nonsense")); })
                .find("unknown option 'fault=nonsense'"),
            std::string::npos);
}

// The reference through the C ABI alone agrees bit for bit with the reference: every op, every
// refusal (it makes its own legality decisions), every exported field, in every h mode.
TEST(PluginCampaign, ReferencePluginAgreesBitwiseOverDrawnConfigurations) {
  fuzz::CampaignOptions o;
  o.caps = Capabilities::everything();  // it declares SSMP_MAMBA2 and SSMP_PLE (BackendEntry::caps)
  o.caps.async_copies = false;          // and has no async path
  o.seed = test::campaign_seed(20261130);
  o.cases = int(test::env_u64("SSMCHECK_CASES", 150));
  o.strictness = cmp::Strictness::bitwise;
  o.backend_label = "plugin:" + kRef;
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), plugin(kRef));
  std::printf("%s", r.summary().c_str());
  EXPECT_FALSE(r.failed) << r.summary();
  EXPECT_FALSE(r.gave_up) << r.message;
  EXPECT_EQ(r.cases, o.cases);
  // it ran what a campaign runs: all three h modes, refusals compared, accept positions
  const auto missing =
      r.coverage.missing({"h mode f32", "h mode f16", "h mode f16-pool", "commit n < k", "rollback to an intermediate",
                          "Mamba-2 softplus threshold", "layers of several kinds in one model",
                          "layers hosting a PLE carry", "a partial accept restoring a PLE carry"});
  EXPECT_TRUE(missing.empty()) << "never reached: " << missing.front();
  EXPECT_GE(r.coverage.refusals.size(), 8u) << "few kinds of refusal compared";
}

// Mamba-2 layers reach only a plug-in that declares SSMP_MAMBA2: the reference plug-in's table
// without the flag is refused a Mamba-2 model, naming the layer and the flag, and still runs GDN.
TEST(PluginCampaign, APluginWithoutMamba2IsRefusedMamba2Layers) {
  static ssmp_plugin gdn_only = *plugin::load_plugin(kRef).table;
  gdn_only.flags &= ~uint32_t(SSMP_MAMBA2);
  plugin::register_plugin("test:gdn-only", &gdn_only);
  GenConfig g;
  PoolConfig pool;
  plugin::PluginBackend b(plugin::PluginSpec::parse("test:gdn-only"));
  const std::string why = error_of([&] { b.create_pool(make_model(make_preset("hybrid-odd"), g), pool); });
  EXPECT_NE(why.find("layer 1 is mamba2("), std::string::npos) << why;
  EXPECT_NE(why.find("does not declare SSMP_MAMBA2"), std::string::npos) << why;
  b.create_pool(make_model(make_preset("odd-a"), g), pool);  // GDN as before
  EXPECT_EQ(b.alloc(0), 0);
}

// PLE carries reach only a plug-in that declares SSMP_PLE: without the flag the reference plug-in's
// table is refused a model with a carry, naming the layer and the flag, and still runs the others.
// A table that declares it must have the three *_ple members; a table of a header from before them
// (struct_size ending at async_pending) still loads when it does not declare SSMP_PLE.
TEST(PluginCampaign, APluginWithoutPleIsRefusedPleCarriesAndItsTableIsChecked) {
  const ssmp_plugin& ref = *plugin::load_plugin(kRef).table;
  static ssmp_plugin no_ple = ref;
  no_ple.flags &= ~uint32_t(SSMP_PLE);
  plugin::register_plugin("test:no-ple", &no_ple);
  GenConfig g;
  PoolConfig pool;
  plugin::PluginBackend b(plugin::PluginSpec::parse("test:no-ple"));
  const std::string why = error_of([&] { b.create_pool(make_model(make_preset("ple-odd"), g), pool); });
  EXPECT_NE(why.find("layer 0 is gdn("), std::string::npos) << why;
  EXPECT_NE(why.find("does not declare SSMP_PLE"), std::string::npos) << why;
  b.create_pool(make_model(make_preset("odd-a"), g), pool);
  EXPECT_EQ(b.alloc(0), 0);

  static ssmp_plugin old_header = no_ple;  // as built against the header before the *_ple members
  old_header.struct_size = uint32_t(offsetof(ssmp_plugin, prefill_ple));
  old_header.prefill_ple = nullptr;
  old_header.decode_ple = nullptr;
  old_header.verify_ple = nullptr;
  EXPECT_EQ(error_of([] { plugin::register_plugin("test:old-header", &old_header); }), "(no error)");
  static ssmp_plugin short_ple = old_header;
  short_ple.flags |= SSMP_PLE;
  const std::string short_why = error_of([] { plugin::register_plugin("test:short-ple", &short_ple); });
  EXPECT_NE(short_why.find("declares SSMP_PLE, but its function table"), std::string::npos) << short_why;
  static ssmp_plugin unset_ple = ref;
  unset_ple.decode_ple = nullptr;
  const std::string unset_why = error_of([] { plugin::register_plugin("test:unset-ple", &unset_ple); });
  EXPECT_NE(unset_why.find("required members not set: decode_ple (SSMP_PLE)"), std::string::npos) << unset_why;
}

// A plug-in whose commit keeps the live state (n < k) is caught, and the case shrinks to a few ops.
TEST(PluginCampaign, ABrokenPluginIsCaughtAndShrunk) {
  fuzz::CampaignOptions o;
  o.caps.ple = false;
  o.seed = test::campaign_seed(7);
  o.cases = 300;
  o.strictness = cmp::Strictness::bitwise;
  o.backend_label = "plugin:" + kRef + ",fault=commit_keeps_live";
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), plugin(kRef + ",fault=commit_keeps_live"));
  std::printf("%s", r.summary().c_str());
  ASSERT_TRUE(r.failed) << "the fault was not found in 300 cases";
  EXPECT_LE(r.script_length, 4) << r.script;
  EXPECT_NE(r.script.find("commit"), std::string::npos) << r.script;
  EXPECT_NE(r.rerun.find("fault=commit_keeps_live"), std::string::npos) << r.rerun;
}

// A plug-in whose commit (n < k) keeps the PLE carry of all K rows (bug class 15) is caught through
// SSMP_PLE alone, on a preset hosting carries, and the case shrinks to a few ops.
TEST(PluginCampaign, APleCarryNotRolledBackInAPluginIsCaughtAndShrunk) {
  fuzz::CampaignOptions o;
  o.seed = test::campaign_seed(11);
  o.cases = 200;
  o.preset = "ple-odd";
  o.strictness = cmp::Strictness::bitwise;
  o.backend_label = "plugin:" + kRef + ",fault=ple_not_rolled_back";
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), plugin(kRef + ",fault=ple_not_rolled_back"));
  std::printf("%s", r.summary().c_str());
  ASSERT_TRUE(r.failed) << "the fault was not found in 200 cases";
  EXPECT_LE(r.script_length, 4) << r.script;
  EXPECT_NE(r.script.find("commit"), std::string::npos) << r.script;
  EXPECT_NE(r.report.find("ple"), std::string::npos) << r.report;
}

// From the command line: bad plug-ins are exit 2 with a message; a crash inside a call is exit 2
// with the call named and the JUnit verdict failing.
TEST(PluginCli, BadPluginsAreExitTwoWithAMessage) {
  const std::string bin = SSMCHECK_BIN;
  for (const auto& [name, says] : std::vector<std::pair<std::string, std::string>>{
           {"no_entry", "does not export ssmcheck_plugin()"},
           {"abi", "ABI version 999"},
           {"missing_call", "required members not set"}}) {
    const auto s = sh(bin + " check --backend " + q("plugin:" + bad(name)) + " --ops 'alloc; decode'");
    EXPECT_EQ(s.code, 2) << name << ": " << s.out;
    EXPECT_NE(s.out.find(says), std::string::npos) << name << ": " << s.out;
  }
  const auto unknown = sh(bin + " fuzz --backend plugin:/nonexistent.so --cases 1");
  EXPECT_EQ(unknown.code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no such file"), std::string::npos) << unknown.out;
}

TEST(PluginCli, ACrashInsideAPluginCallIsExitTwoAndAFailingVerdict) {
  test::TempDir dir("ssmcheck-plugin");
  const std::string junit = dir.file("j.xml");
  // in ssmcheck's own process (debugging); in its host, tests/hosted_plugin_test.cpp
  const auto s = sh(std::string(SSMCHECK_BIN) + " check --backend " + q("plugin-in-process:" + kRef + ",fault=abort_in_commit") +
                    " --junit " + q(junit) + " --ops 'alloc; verify 3; commit 2 3'");
  EXPECT_EQ(s.code, 2) << s.out;
  EXPECT_NE(s.out.find("the plug-in crashed (SIGABRT) inside plugin:libssmcheck_reference_plugin: commit(slot 0, n 2, k 3)"),
            std::string::npos)
      << s.out;
  std::ifstream f(junit);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("failures=\"1\""), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("crashed"), std::string::npos) << text.str();
}

// The gate takes a plug-in like a built-in: golden traces replay on it, faulty ones are
// pinpointed, and its campaign runs bitwise.
TEST(PluginCli, GateRunsAPluginLikeABuiltIn) {
  const auto s = sh(std::string(SSMCHECK_BIN) + " gate --cases 20 --no-coverage --backend " + q("plugin:" + kRef));
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("campaign.plugin:libssmcheck_reference_plugin"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("replay.golden.plugin:libssmcheck_reference_plugin"), std::string::npos) << s.out;
  // it declares SSMP_PLE: the PLE traces replay on it too (the faulty ple_not_rolled_back and
  // ple_history_truncated pinpointed), nothing is skipped
  EXPECT_EQ(s.out.find("skipped"), std::string::npos) << s.out;
  const auto ple = sh(std::string(SSMCHECK_BIN) + " replay --backend " + q("plugin:" + kRef) + " " +
                      q(std::string(SSMCHECK_FIXTURES_DIR) + "/traces/faulty/ple_not_rolled_back.h5"));
  EXPECT_EQ(ple.code, 1) << ple.out;
  EXPECT_NE(ple.out.find("pinpointed"), std::string::npos) << ple.out;
  const auto list = sh(std::string(SSMCHECK_BIN) + " backends " + q("plugin:" + kRef));
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("legality: its own (refusals compared), judged: bitwise"), std::string::npos) << list.out;
}

}  // namespace
}  // namespace ssm
