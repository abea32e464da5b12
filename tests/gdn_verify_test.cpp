// reference/verify.cpp, metamorphic: verify(K) then commit(n, K) equals n decodes from the
// same start (bitwise), and intermediate t equals the state after t+1 decodes.
#include <gtest/gtest.h>

#include "tests/support/ref_harness.h"
#include "tests/support/ref_params.h"

namespace ssm::test {

class GdnVerify : public ::testing::TestWithParam<RefParam> {
 protected:
  // Two backends with the same history: alloc; prefill 5.
  void start(RefCase& c) {
    ASSERT_EQ(c.backend->alloc(0), 0);
    c.backend->prefill(0, c.inputs(1, 5));
  }
};

TEST_P(GdnVerify, VerifyThenCommitEqualsDecodes) {
  const auto& [preset, mode, seed] = GetParam();
  for (int K = 1; K <= 4; ++K) {
    for (int n = 1; n <= K; ++n) {
      RefCase a(preset, mode, seed), b(preset, mode, seed);
      SCOPED_TRACE(a.name() + " K=" + std::to_string(K) + " n=" + std::to_string(n));
      start(a);
      start(b);
      const StepInputs rows = a.inputs(2, K);
      const auto vout = a.backend->verify({0}, K, VerifyArm::exact, {rows});
      a.backend->commit(0, n, K);
      for (int t = 0; t < n; ++t) {
        const auto dout = b.backend->decode({0}, {slice_rows(b.spec, rows, t, 1)});
        for (size_t l = 0; l < b.spec.layers.size(); ++l) {
          const size_t w = size_t(b.spec.layers[l].out_dim());
          ASSERT_TRUE(std::equal(dout[0].layers[l].begin(), dout[0].layers[l].end(),
                                 vout[0].layers[l].begin() + long(size_t(t) * w)))
              << "output row " << t << " layer " << l;
        }
      }
      const std::string d = state_diff(a.backend->export_state(0), b.backend->export_state(0), true);
      EXPECT_EQ(d, "");
    }
  }
}

TEST_P(GdnVerify, IntermediateTEqualsStateAfterTPlusOneDecodes) {
  const auto& [preset, mode, seed] = GetParam();
  const int K = 4;
  RefCase a(preset, mode, seed);
  SCOPED_TRACE(a.name());
  start(a);
  const StepInputs rows = a.inputs(2, K);
  a.backend->verify({0}, K, VerifyArm::exact, {rows});
  const SequenceState va = a.backend->export_state(0);
  ASSERT_EQ(va.last_verify_k, K);
  ASSERT_EQ(va.layers[0].h_intermediates.size(), size_t(K - 1));  // only 0..K-2 are valid
  for (int t = 0; t + 1 < K; ++t) {
    RefCase b(preset, mode, seed);
    start(b);
    for (int r = 0; r <= t; ++r) b.backend->decode({0}, {slice_rows(b.spec, rows, r, 1)});
    const SequenceState sb = b.backend->export_state(0);
    for (size_t l = 0; l < sb.layers.size(); ++l) {
      EXPECT_EQ(tensor_diff(va.layers[l].h_intermediates[size_t(t)], sb.layers[l].h, "h_intermediate"), "")
          << "t=" << t << " layer " << l;
      EXPECT_EQ(tensor_diff(va.layers[l].conv_intermediates[size_t(t)], sb.layers[l].conv, "conv_intermediate"), "")
          << "t=" << t << " layer " << l;
    }
  }
}

TEST_P(GdnVerify, BatchedVerifyWithPaddingEqualsOneByOne) {
  const auto& [preset, mode, seed] = GetParam();
  RefCase a(preset, mode, seed), b(preset, mode, seed);
  SCOPED_TRACE(a.name());
  for (RefCase* c : {&a, &b}) {
    c->backend->alloc(0);
    c->backend->alloc(0);
    c->backend->prefill(0, c->inputs(1, 3, 0));
    c->backend->prefill(1, c->inputs(1, 6, 1));
  }
  const StepInputs r0 = a.inputs(2, 3, 0), r1 = a.inputs(2, 3, 1), pad = a.inputs(2, 3, 9);
  const auto batched = a.backend->verify({1, kPadRow, 0}, 3, VerifyArm::exact, {r1, pad, r0});
  const auto o0 = b.backend->verify({0}, 3, VerifyArm::exact, {r0});
  const auto o1 = b.backend->verify({1}, 3, VerifyArm::exact, {r1});
  EXPECT_EQ(batched[0].layers, o1[0].layers);
  EXPECT_EQ(batched[2].layers, o0[0].layers);
  for (int s = 0; s < 2; ++s)
    EXPECT_EQ(state_diff(a.backend->export_state(s), b.backend->export_state(s), false), "") << "slot " << s;
}

INSTANTIATE_TEST_SUITE_P(Grid, GdnVerify, ref_grid(), ref_param_name);

}  // namespace ssm::test
