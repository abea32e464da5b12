// reference/gdn_decode.cpp: batched decode with padding equals one-by-one; padding rows never
// touch claimed slots.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/ref_harness.h"
#include "tests/support/ref_params.h"

namespace ssm::test {

class GdnDecode : public ::testing::TestWithParam<RefParam> {};

TEST_P(GdnDecode, BatchedWithPaddingEqualsOneByOne) {
  const auto& [preset, mode, seed] = GetParam();
  RefCase a(preset, mode, seed), b(preset, mode, seed);
  SCOPED_TRACE(a.name());
  for (RefCase* c : {&a, &b})
    for (int s = 0; s < 3; ++s) {
      c->backend->alloc(0);
      c->backend->prefill(s, c->inputs(1, 2 + s, s));
    }
  const SequenceState untouched = a.backend->export_state(1);
  for (int step = 2; step < 5; ++step) {
    const StepInputs i0 = a.inputs(step, 1, 0), i2 = a.inputs(step, 1, 2), pad = a.inputs(step, 1, 99);
    const auto batched = a.backend->decode({2, kPadRow, 0, kPadRow}, {i2, pad, i0, pad});
    EXPECT_EQ(batched[0].layers, b.backend->decode({2}, {i2})[0].layers);
    EXPECT_EQ(batched[2].layers, b.backend->decode({0}, {i0})[0].layers);
  }
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(state_diff(a.backend->export_state(s), b.backend->export_state(s), false), "") << "slot " << s;
  EXPECT_EQ(state_diff(a.backend->export_state(1), untouched, false), "");
}

TEST_P(GdnDecode, OutputsAreFiniteAndNonZero) {
  const auto& [preset, mode, seed] = GetParam();
  RefCase c(preset, mode, seed);
  c.backend->alloc(0);
  const auto out = c.backend->decode({0}, {c.inputs(1, 1)});
  for (const auto& layer : out[0].layers) {
    double s = 0;
    for (float v : layer) {
      ASSERT_TRUE(std::isfinite(v));
      s += std::abs(v);
    }
    EXPECT_GT(s, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, GdnDecode, ref_grid(), ref_param_name);

}  // namespace ssm::test
