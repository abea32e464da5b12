// The two verify arms on the device: the exact arm equals K decode launches bit for bit
// (live state, every intermediate, every output); the WY arm equals the exact arm within the
// fp32-state / fp16-state and output classes.
#include <gtest/gtest.h>

#include <tuple>

#include "cuda_test_support.h"

namespace ssm::test {
namespace {

using Param = std::tuple<std::string, int, HMode, int>;  // preset, layers, mode, K

std::vector<Param> params() {
  std::vector<Param> v;
  for (HMode m : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    for (int k : {1, 2, 3, 4, 6}) {
      v.emplace_back("odd-a", 0, m, k);
      v.emplace_back("odd-c", 0, m, k);
    }
    for (int k : {2, 4, 8}) {
      v.emplace_back("odd-d", 0, m, k);
      v.emplace_back("qwen3-next-80b", 1, m, k);
      v.emplace_back("nemotron-h-8b", 1, m, k);  // Mamba-2 (both arms run the row kernel)
    }
    for (int k : {1, 2, 3, 4, 6}) {
      v.emplace_back("mamba-odd-b", 0, m, k);
      v.emplace_back("mamba-odd-c", 0, m, k);
      v.emplace_back("hybrid-odd", 0, m, k);
      v.emplace_back("ple-odd", 0, m, k);  // the PLE carry's snapshots: the same bits from both arms
    }
  }
  return v;
}

std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  return gtest_name(std::get<0>(i.param) + "_" + to_string(std::get<2>(i.param)) + "_K" + std::to_string(std::get<3>(i.param)));
}

GpuCase case_of(const Param& p) {
  GpuCase c;
  c.preset = std::get<0>(p);
  c.layers = std::get<1>(p);
  c.mode = std::get<2>(p);
  c.capacity = 8;
  c.seed = 23 + uint64_t(std::get<3>(p));
  return c;
}

class VerifyGpu : public GpuTestP<Param> {};

TEST_P(VerifyGpu, ExactArmEqualsKDecodes) {
  const GpuCase c = case_of(GetParam());
  const int K = std::get<3>(GetParam());
  std::printf("gpu case: %s K=%d\n", c.name().c_str(), K);
  GpuPair p(c);
  const int sa = p.a->alloc(K - 1), sb = p.b->alloc(K - 1);
  for (auto* be : {p.a.get(), p.b.get()}) {
    const int s = be == p.a.get() ? sa : sb;
    be->prefill(s, p.inputs(0, 0, 5));
    be->decode({s}, {p.inputs(1, 0, 1)});
  }
  for (int round = 0; round < 2; ++round) {  // the second round starts from a verified state
    const StepInputs in = p.inputs(2 + round, 0, K);
    const StepOutputs va = p.a->verify({sa}, K, VerifyArm::exact, {in})[0];
    const SequenceState A = p.a->export_state(sa);
    for (int t = 0; t < K; ++t) {
      const StepOutputs d = p.b->decode({sb}, {in.slice(p.spec, t, 1)})[0];
      ASSERT_EQ(outputs_diff(va, t, d), "") << c.name() << " K=" << K << " round " << round << " row " << t;
      const SequenceState B = p.b->export_state(sb);
      for (size_t l = 0; l < A.layers.size(); ++l) {
        const Tensor& h = t + 1 < K ? A.layers[l].h_intermediates.at(size_t(t)) : A.layers[l].h;
        const Tensor& cv = t + 1 < K ? A.layers[l].conv_intermediates.at(size_t(t)) : A.layers[l].conv;
        ASSERT_TRUE(h.bit_equal(B.layers[l].h)) << c.name() << " K=" << K << " row " << t << " layer " << l << " h";
        ASSERT_TRUE(cv.bit_equal(B.layers[l].conv)) << c.name() << " K=" << K << " row " << t << " layer " << l << " conv";
      }
    }
  }
  EXPECT_EQ(p.a->check_guards(), "");
}

TEST_P(VerifyGpu, WyArmMatchesExactArm) {
  const GpuCase c = case_of(GetParam());
  const int K = std::get<3>(GetParam());
  std::printf("gpu case: %s K=%d\n", c.name().c_str(), K);
  GpuPair p(c);
  const int sa = p.a->alloc(K - 1), sb = p.b->alloc(K - 1);
  p.a->prefill(sa, p.inputs(0, 0, 5));
  p.b->prefill(sb, p.inputs(0, 0, 5));
  for (int round = 0; round < 3; ++round) {
    const StepInputs in = p.inputs(1 + round, 0, K);
    const StepOutputs oa = p.a->verify({sa}, K, VerifyArm::exact, {in})[0];
    const StepOutputs ob = p.b->verify({sb}, K, VerifyArm::wy, {in})[0];
    cmp::Where w;
    w.op_index = round;
    w.op = "verify " + std::to_string(K) + " exact vs wy";
    const cmp::StateReport ro = cmp::compare_outputs(p.spec, oa, ob, cmp::Tolerances::defaults(), w, cmp::Strictness::classes,
                                                        c.mode != HMode::f32);
    ASSERT_TRUE(ro.pass()) << c.name() << "\n" << state_report(ro);
    const cmp::StateReport rs =
        cmp::compare_state(p.a->export_state(sa), p.b->export_state(sb), cmp::Tolerances::defaults(), w,
                           cmp::Strictness::classes, cmp::assumed_lineage(c.mode));
    ASSERT_TRUE(rs.pass()) << c.name() << "\n" << state_report(rs);
    if (K > 1) {  // keep a partial accept so the next round starts from an intermediate
      p.a->commit(sa, 1 + round % (K - 1), K);
      p.b->commit(sb, 1 + round % (K - 1), K);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arms, VerifyGpu, ::testing::ValuesIn(params()), param_name);

}  // namespace
}  // namespace ssm::test
