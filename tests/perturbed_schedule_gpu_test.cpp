// Schedule perturbation (cuda/schedule.h, docs/cuda.md "Perturbed schedules"). On the CPU: every
// plan is a bijection cut into 2 to 4 waves, and the same seed draws the same plans. On the GPU: a
// perturbed CUDA backend computes every bit the plain one computes, on every preset family and
// h mode, with async copies paused and delayed (the order of blocks never changes a result of a
// correct kernel; the one-wave mutant that it does catch is in property_gpu_mutant_test).
#include <gtest/gtest.h>

#include "cuda/schedule.h"
#include "fuzz/backend_entry.h"
#include "tests/cuda_test_support.h"

namespace ssm::test {

TEST(Schedule, PlansAreBijectionsCutIntoWavesAndRepeatFromTheirSeed) {
  bool differs = false;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    cuda::Schedule a, b, c;
    a.perturb(seed);
    b.perturb(seed);
    c.perturb(seed + 1000);
    for (unsigned n : {1u, 2u, 3u, 7u, 64u, 97u, 1000u, 4096u, 65537u}) {
      const cuda::Schedule::Plan p = a.next(n), q = b.next(n), r = c.next(n);
      ASSERT_TRUE(cuda::is_bijection(p, n)) << "seed " << seed << " n " << n;
      const size_t waves = p.cuts.size() - 1;
      EXPECT_GE(waves, n >= 2 ? 2u : 1u) << "seed " << seed << " n " << n;
      EXPECT_LE(waves, 4u);
      EXPECT_EQ(p.mul, q.mul);
      EXPECT_EQ(p.add, q.add);
      EXPECT_EQ(p.cuts, q.cuts);
      differs = differs || p.mul != r.mul || p.add != r.add || p.cuts != r.cuts;
    }
    const unsigned first = a.delay_ns();
    EXPECT_GE(first, 10000u);
    EXPECT_LE(first, 60000u);
    a.reset();
    b.reset();
    EXPECT_EQ(a.next(97).cuts, b.next(97).cuts) << "reset starts the plan again";
    EXPECT_GE(a.persistent_grid(64), 8u);
    EXPECT_LE(a.persistent_grid(64), 32u);
    EXPECT_EQ(a.persistent_grid(1), 1u);
  }
  EXPECT_TRUE(differs) << "another seed draws other plans";
}

TEST(Schedule, IsCurrentOnlyInsideItsScopeAndOnlyWhenOn) {
  cuda::Schedule off, on;
  on.perturb(7);
  EXPECT_EQ(cuda::current_schedule(), nullptr);
  {
    const cuda::ScheduleScope s(&off);
    EXPECT_EQ(cuda::current_schedule(), nullptr) << "a schedule that perturbs nothing is not current";
    {
      const cuda::ScheduleScope t(&on);
      EXPECT_EQ(cuda::current_schedule(), &on);
    }
    EXPECT_EQ(cuda::current_schedule(), nullptr);
  }
}

struct PerturbedCase {
  GpuCase c;
  std::string script;
};

class PerturbedScheduleGpu : public GpuTestP<PerturbedCase> {};

// The plain CUDA backend is the model, the perturbed one the implementation under test, judged bit
// for bit after every op; guard bands checked after every op; async copies of the perturbed side
// held until their reader waits.
TEST_P(PerturbedScheduleGpu, ChangesNoBit) {
  const PerturbedCase& p = GetParam();
  SCOPED_TRACE("case: " + p.c.name() + " script: " + p.script);
  for (uint64_t seed : {uint64_t(1), uint64_t(2), fuzz::kPerturbSeed}) {
    std::printf("perturbed case: %s, schedule seed %llu\n", p.c.name().c_str(), static_cast<unsigned long long>(seed));
    const fuzz::ReplayResult r = fuzz::check_script(
        p.c.config(), parse_script(p.script), [] { return std::unique_ptr<Backend>(new cuda::CudaBackend()); },
        [seed] {
          auto b = std::make_unique<cuda::CudaBackend>();
          b->perturb_schedule(seed);
          return std::unique_ptr<Backend>(std::move(b));
        },
        cmp::Tolerances::defaults(), cmp::Strictness::bitwise, "",
        [](Backend& b) { return static_cast<cuda::CudaBackend&>(b).check_guards(); }, /*pause_async=*/true);
    ASSERT_TRUE(r.pass) << "schedule seed " << seed << "\n"
                        << (r.report.size() > 6000 ? r.report.substr(0, 6000) : r.report);
    EXPECT_GT(r.accepted, 5) << "the script ran";
  }
}

namespace {
GpuCase gpu_case(const std::string& preset, HMode mode, int layers = 0) {
  GpuCase c;
  c.preset = preset;
  c.mode = mode;
  c.layers = layers;
  c.seed = 41;
  c.slots = 4;
  c.capacity = 5;
  return c;
}
// Every transition, single and batched (padding rows included), async checkpoints and snapshots.
const char* kEveryOp =
    "alloc @0; alloc @1; alloc @2; prefill 5 @0; prefill 3 @1; prefill 4 @2; checkpoint_async @0; "
    "decode @0,pad,1,2; verify 4 @1,0,pad; commit 2 4 @1; rollback 3 @0; checkpoint @2; verify 3 wy @2,pad,0; "
    "commit 3 3 @2; rollback 1 @0; snapshot_save 0 @1; decode @1,2; snapshot_restore 0 @1; "
    "rollback_and_checkpoint_async 0 @2; decode @2,0,1; release @1; alloc @1; prefill 2 @1; decode @0,1,2";
std::vector<PerturbedCase> perturbed_cases() {
  std::vector<PerturbedCase> v;
  for (const GpuCase& c : {gpu_case("tiny", HMode::f32), gpu_case("odd-a", HMode::f16_pool),
                           gpu_case("odd-d", HMode::f32), gpu_case("mamba-odd-b", HMode::f16_pool),
                           gpu_case("hybrid-odd", HMode::f32), gpu_case("ple-odd", HMode::f16_pool),
                           gpu_case("qwen3-next-80b", HMode::f16_pool, 2), gpu_case("mamba-wide", HMode::f32, 1)})
    v.push_back({c, kEveryOp});
  return v;
}
}  // namespace

INSTANTIATE_TEST_SUITE_P(Presets, PerturbedScheduleGpu, ::testing::ValuesIn(perturbed_cases()),
                         [](const ::testing::TestParamInfo<PerturbedCase>& i) {
                           return gtest_name(i.param.c.preset + "_" + to_string(i.param.c.mode));
                         });

}  // namespace ssm::test
