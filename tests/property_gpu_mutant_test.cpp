// The catalogue's CUDA mutants (fuzz/mutant_catalogue.cpp, backend "cuda"), switched on one at a
// time in the mutant build of cuda/: the campaign the gate runs against CUDA (reference vs cuda
// under the classes, async copies paused, guard bands checked, 30-op cases) must catch each one
// and shrink it. The same table on the command line: `ssmcheck mutants --backend cuda`.
#include <gtest/gtest.h>

#include "core/mutant.h"
#include "fuzz/campaign.h"
#include "fuzz/mutant_catalogue.h"
#include "reference/reference_backend.h"
#include "tests/cuda_test_support.h"
#include "tests/support/campaign_env.h"

namespace ssm::test {

namespace {
// The race mutants are judged by racecheck (`ssmcheck mutants --backend cuda`, ctest mutants.cuda),
// not here: whether a campaign sees a race depends on the GPU's timing (MutantInfo::race_ops).
std::vector<std::string> cuda_mutants() {
  std::vector<std::string> v;
  for (const auto& m : fuzz::mutant_catalogue())
    if (m.backend == "cuda" && m.race_ops.empty()) v.push_back(m.name);
  return v;
}
}  // namespace

class PropertyGpuMutant : public GpuTestP<std::string> {};

TEST_P(PropertyGpuMutant, IsCaughtAndShrunk) {
  mutant::select(GetParam());
  fuzz::CampaignOptions o;  // as the gate's CUDA campaign (replay/gate.cpp)
  o.caps = Capabilities::everything();  // CUDA's (BackendEntry::caps)
  o.seed = campaign_seed(1);
  o.cases = int(env_u64("SSMCHECK_CASES", 1000));
  o.max_ops = 30;
  o.backend_label = "cuda";
  o.pause_async = true;
  o.sut_invariant = [](Backend& b) { return static_cast<cuda::CudaBackend&>(b).check_guards(); };
  const fuzz::CampaignResult r = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); },
      [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); });
  mutant::select("");
  std::printf("mutant %s:\n%s", GetParam().c_str(), r.summary().c_str());
  ASSERT_TRUE(r.failed) << "mutant " << GetParam() << " survived " << r.cases << " cases";
  EXPECT_LE(r.script_length, 8) << r.script;
}

INSTANTIATE_TEST_SUITE_P(Catalogue, PropertyGpuMutant, ::testing::ValuesIn(cuda_mutants()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace ssm::test
