// The GPU campaign against a test-only build of the CUDA row kernel whose intermediate table is
// indexed off by one slot (bug class 4: one sequence's intermediates land in its neighbour's). The
// campaign must catch it, shrink it to a short script and name an intermediate in the report.
#include <gtest/gtest.h>

#include "fuzz/campaign.h"
#include "reference/reference_backend.h"
#include "tests/cuda_test_support.h"
#include "tests/support/campaign_env.h"

namespace ssm::test {

class PropertyGpuMutant : public GpuTest {};

TEST_F(PropertyGpuMutant, IntermediatesInTheNeighboursSlotAreCaughtAndShrunk) {
  fuzz::CampaignOptions o;
  o.seed = campaign_seed(404);
  o.cases = 300;
  o.max_ops = 40;
  o.backend_label = "cuda";
  o.sut_invariant = [](Backend& b) { return static_cast<cuda::CudaBackend&>(b).check_guards(); };
  const fuzz::CampaignResult r = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); },
      [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); });
  std::printf("%s", r.summary().c_str());
  ASSERT_TRUE(r.failed) << "the mutant survived " << r.cases << " cases";
  EXPECT_LE(r.script_length, 4) << r.script;
  EXPECT_NE(r.script.find("verify"), std::string::npos) << r.script;
  EXPECT_NE(r.report.find("h_intermediate"), std::string::npos) << r.report;
}

}  // namespace ssm::test
