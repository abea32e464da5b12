// Batched decode and verify (several sequences and padding rows in one launch) against the
// same sequences run one by one: every state field and every real row's output bit for bit.
#include <gtest/gtest.h>

#include <tuple>

#include "cuda_test_support.h"

namespace ssm::test {
namespace {

using Param = std::tuple<std::string, int, HMode>;

class BatchGpu : public GpuTestP<Param> {};

TEST_P(BatchGpu, BatchedEqualsOneByOne) {
  GpuCase c;
  c.preset = std::get<0>(GetParam());
  c.layers = std::get<1>(GetParam());
  c.mode = std::get<2>(GetParam());
  c.slots = 4;
  c.seed = 31;
  std::printf("gpu case: %s\n", c.name().c_str());
  GpuPair p(c);
  std::vector<int> sa, sb;
  for (int q = 0; q < 3; ++q) {
    sa.push_back(p.a->alloc(0));
    sb.push_back(p.b->alloc(0));
    p.a->prefill(sa.back(), p.inputs(0, q, 2 + 2 * q));
    p.b->prefill(sb.back(), p.inputs(0, q, 2 + 2 * q));
  }
  struct Step { int k; VerifyArm arm; std::vector<int> seqs; };  // k == 0: decode
  const std::vector<Step> steps = {
      {0, VerifyArm::exact, {0, kPadRow, 1, 2}}, {3, VerifyArm::exact, {2, 0, kPadRow, 1}},
      {4, VerifyArm::wy, {1, kPadRow, 0, 2}},    {0, VerifyArm::exact, {2, 1, 0}},
      {2, VerifyArm::wy, {kPadRow, 0, kPadRow, 2}}};
  for (size_t op = 0; op < steps.size(); ++op) {
    const Step& st = steps[op];
    const int rows = st.k ? st.k : 1;
    std::vector<int> slots;
    std::vector<StepInputs> in;
    for (int q : st.seqs) {
      slots.push_back(q == kPadRow ? kPadRow : sa[size_t(q)]);
      in.push_back(p.inputs(int(op) + 1, q == kPadRow ? 99 : q, rows));
    }
    const std::vector<StepOutputs> ob =
        st.k ? p.a->verify(slots, st.k, st.arm, in) : p.a->decode(slots, in);
    for (size_t i = 0; i < st.seqs.size(); ++i) {
      const int q = st.seqs[i];
      if (q == kPadRow) continue;
      const int s = sb[size_t(q)];
      const StepOutputs one = st.k ? p.b->verify({s}, st.k, st.arm, {in[i]})[0] : p.b->decode({s}, {in[i]})[0];
      ASSERT_EQ(outputs_diff(ob[i], 0, one), "") << c.name() << " op " << op << " seq " << q;
      const cmp::StateReport r =
          bitwise_state(p.b->export_state(s), p.a->export_state(sa[size_t(q)]), "batched op " + std::to_string(op));
      ASSERT_TRUE(r.pass()) << c.name() << " seq " << q << "\n" << state_report(r);
    }
  }
  EXPECT_EQ(p.a->check_guards(), "");
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (HMode m : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    v.emplace_back("tiny", 0, m);
    v.emplace_back("odd-b", 0, m);
    v.emplace_back("odd-d", 0, m);
    v.emplace_back("qwen3-next-80b", 1, m);
    v.emplace_back("mamba-odd-a", 0, m);
    v.emplace_back("hybrid-odd", 0, m);
    v.emplace_back("ple-odd", 0, m);
    v.emplace_back("nemotron-h-8b", 1, m);
  }
  return v;
}

std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  return gtest_name(std::get<0>(i.param) + "_" + to_string(std::get<2>(i.param)));
}

INSTANTIATE_TEST_SUITE_P(Presets, BatchGpu, ::testing::ValuesIn(params()), param_name);

}  // namespace
}  // namespace ssm::test
