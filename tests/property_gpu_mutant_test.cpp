// The catalogue's CUDA mutants (fuzz/mutant_catalogue.cpp, backend "cuda"), switched on one at a
// time in the mutant build of cuda/: the campaign the gate runs against CUDA (reference vs cuda
// under the classes, async copies paused, guard bands checked, 30-op cases) must catch each one
// and shrink it. The same table on the command line: `ssmcheck mutants --backend cuda`.
#include <gtest/gtest.h>

#include "core/mutant.h"
#include "fuzz/backend_entry.h"
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

fuzz::BackendFactory perturbed_cuda(uint64_t seed) {
  return [seed] {
    auto b = std::make_unique<cuda::CudaBackend>();
    b->perturb_schedule(seed);
    return std::unique_ptr<Backend>(std::move(b));
  };
}
}  // namespace

class PropertyGpuMutant : public GpuTestP<std::string> {};

TEST_P(PropertyGpuMutant, IsCaughtAndShrunk) {
  mutant::select(GetParam());
  fuzz::CampaignOptions o;              // as the gate's CUDA campaign (replay/gate.cpp)
  o.caps = Capabilities::everything();  // CUDA's (BackendEntry::caps)
  o.seed = campaign_seed(1);
  o.cases = int(env_u64("SSMCHECK_CASES", 1000));
  o.max_ops = 30;
  o.backend_label = "cuda";
  o.pause_async = true;
  o.sut_invariant = [](Backend& b) { return static_cast<cuda::CudaBackend&>(b).check_guards(); };
  auto reference = [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
  fuzz::CampaignResult r =
      fuzz::run_campaign(o, reference, [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); });
  if (!r.failed) {  // then, as the gate does, half as many cases from the next seed on a perturbed schedule
    std::printf("mutant %s survived the plain campaign:\n%s", GetParam().c_str(), r.summary().c_str());
    o.seed += 1;
    o.cases = std::max(1, o.cases / 2);
    o.backend_label = std::string(fuzz::kPerturbedPrefix) + "cuda";
    r = fuzz::run_campaign(o, reference, perturbed_cuda(fuzz::kPerturbSeed));
  }
  mutant::select("");
  std::printf("mutant %s:\n%s", GetParam().c_str(), r.summary().c_str());
  ASSERT_TRUE(r.failed) << "mutant " << GetParam() << " survived " << r.cases << " cases";
  EXPECT_LE(r.script_length, 8) << r.script;
}

// A conv window committed in place before a sibling block reads it (tokenspeed #857's class) is
// right while both blocks are resident at once, as they are in one wave: a plain run catches it by
// timing or not at all. A perturbed schedule catches it on every seed, on a small grid.
class PerturbedScheduleMutantGpu : public GpuTest {};

TEST_F(PerturbedScheduleMutantGpu, CatchesTheOneWaveConvWindowOnEverySeed) {
  GpuCase c;
  c.preset = "odd-a";
  c.slots = 3;
  c.capacity = 4;
  const std::string script = "alloc @0; alloc @1; prefill 3 @0; prefill 2 @1; decode @0,1; decode @1,0; verify 3 @0,1";
  auto reference = [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
  mutant::select("cuda_conv_window_one_wave");
  const fuzz::ReplayResult plain = fuzz::check_script(
      c.config(), parse_script(script), reference, [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); },
      cmp::Tolerances::defaults(), cmp::Strictness::classes);
  std::printf("plain schedule (timing decides, not asserted): %s\n", plain.pass ? "passed" : "caught");
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const fuzz::ReplayResult r = fuzz::check_script(c.config(), parse_script(script), reference, perturbed_cuda(seed),
                                                    cmp::Tolerances::defaults(), cmp::Strictness::classes);
    EXPECT_FALSE(r.pass) << "schedule seed " << seed << ": the one-wave conv window survived " << c.name() << " "
                         << script;
  }
  mutant::select("");
  const fuzz::ReplayResult shipped = fuzz::check_script(c.config(), parse_script(script), reference, perturbed_cuda(1),
                                                        cmp::Tolerances::defaults(), cmp::Strictness::classes);
  EXPECT_TRUE(shipped.pass) << "without the mutant the perturbed schedule agrees\n" << shipped.report;
}

// Issue 41's f16-pool prefill divergence: after a widen of FP16 h, a conv kernel launched as a
// programmatic dependent lets the row kernels load H before the widen's stores are visible. On the
// plain schedule it showed about once per 15,000 sequences under 16 campaigns at once and never on a
// rerun; a perturbed schedule's widen stores 10-60 us after it lets the next kernel start, so the
// mutant that keeps the dependent launch (the code before the fix) fails on every seed. On f16 pools:
// there each layer widens right before its kernels (f16 mode widens every layer before the first
// one runs, so only the last layer's widen can still be in flight, far from its readers).
TEST_F(PerturbedScheduleMutantGpu, CatchesTheWidenRaceOnEverySeed) {
  const std::string script = "alloc; prefill 3; decode; prefill 2; decode; prefill 1; verify 2; commit 2 2; prefill 4";
  auto reference = [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
  for (const auto& [preset, mode] :
       {std::make_pair("mamba-wide", HMode::f16_pool), std::make_pair("odd-a", HMode::f16_pool)}) {
    GpuCase c;
    c.preset = preset;
    c.mode = mode;
    c.seed = 23;
    mutant::select("cuda_conv_races_widen");
    const fuzz::ReplayResult plain = fuzz::check_script(
        c.config(), parse_script(script), reference, [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); },
        cmp::Tolerances::defaults(), cmp::Strictness::classes);
    std::printf("%s, plain schedule (timing decides, not asserted): %s\n", c.name().c_str(),
                plain.pass ? "passed" : "caught");
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      const fuzz::ReplayResult r = fuzz::check_script(c.config(), parse_script(script), reference, perturbed_cuda(seed),
                                                      cmp::Tolerances::defaults(), cmp::Strictness::classes);
      EXPECT_FALSE(r.pass) << "schedule seed " << seed << ": the widen race survived " << c.name() << " " << script;
    }
    mutant::select("");
    const fuzz::ReplayResult shipped =
        fuzz::check_script(c.config(), parse_script(script), reference, perturbed_cuda(1), cmp::Tolerances::defaults(),
                           cmp::Strictness::classes);
    EXPECT_TRUE(shipped.pass) << "without the mutant the perturbed schedule agrees\n" << shipped.report;
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, PropertyGpuMutant, ::testing::ValuesIn(cuda_mutants()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace ssm::test
