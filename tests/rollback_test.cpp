// reference/rollback.cpp, checkpoint.cpp, commit.cpp: restores are bit-exact.
#include <gtest/gtest.h>

#include "tests/support/ref_harness.h"
#include "tests/support/ref_params.h"

namespace ssm::test {

class GdnRollback : public ::testing::TestWithParam<RefParam> {};

TEST_P(GdnRollback, RollbackZeroRestoresTheCheckpointBitForBit) {
  const auto& [preset, mode, seed] = GetParam();
  for (bool async : {false, true}) {
    RefCase c(preset, mode, seed);
    SCOPED_TRACE(c.name() + (async ? " checkpoint_async" : " checkpoint"));
    c.backend->alloc(0);
    c.backend->prefill(0, c.inputs(1, 4));
    if (mode == HMode::f16) c.backend->to_f16(0);  // checkpoint FP16 h, as an engine must
    c.backend->checkpoint(0, async);
    const SequenceState saved = c.backend->export_state(0);
    ASSERT_TRUE(saved.layers[0].h_checkpoint.has_value());
    EXPECT_EQ(tensor_diff(*saved.layers[0].h_checkpoint, saved.layers[0].h, "checkpoint"), "");
    c.backend->verify({0}, 3, VerifyArm::exact, {c.inputs(2, 3)});
    c.backend->decode({0}, {c.inputs(3, 1)});
    c.backend->rollback(0, 0, false);
    EXPECT_EQ(state_diff(c.backend->export_state(0), saved, true), "");
  }
}

TEST_P(GdnRollback, RollbackNRestoresIntermediateNMinusOne) {
  const auto& [preset, mode, seed] = GetParam();
  for (int n = 1; n <= 3; ++n) {
    RefCase c(preset, mode, seed);
    SCOPED_TRACE(c.name() + " n=" + std::to_string(n));
    c.backend->alloc(0);
    c.backend->prefill(0, c.inputs(1, 2));
    c.backend->verify({0}, 4, VerifyArm::exact, {c.inputs(2, 4)});
    const SequenceState v = c.backend->export_state(0);
    c.backend->rollback(0, n, false);
    const SequenceState r = c.backend->export_state(0);
    for (size_t l = 0; l < r.layers.size(); ++l) {
      EXPECT_EQ(tensor_diff(r.layers[l].h, v.layers[l].h_intermediates[size_t(n - 1)], "h"), "");
      EXPECT_EQ(tensor_diff(r.layers[l].conv, v.layers[l].conv_intermediates[size_t(n - 1)], "conv"), "");
    }
  }
}

TEST_P(GdnRollback, RollbackAndCheckpointMakesTheRolledBackStateTheCheckpoint) {
  const auto& [preset, mode, seed] = GetParam();
  RefCase c(preset, mode, seed);
  SCOPED_TRACE(c.name());
  c.backend->alloc(0);
  c.backend->prefill(0, c.inputs(1, 3));
  c.backend->verify({0}, 3, VerifyArm::exact, {c.inputs(2, 3)});
  const SequenceState v = c.backend->export_state(0);
  c.backend->rollback(0, 2, true);
  const SequenceState r = c.backend->export_state(0);
  for (size_t l = 0; l < r.layers.size(); ++l) {
    EXPECT_EQ(tensor_diff(r.layers[l].h, v.layers[l].h_intermediates[1], "h"), "");
    ASSERT_TRUE(r.layers[l].h_checkpoint && r.layers[l].conv_checkpoint);
    EXPECT_EQ(tensor_diff(*r.layers[l].h_checkpoint, r.layers[l].h, "h_checkpoint"), "");
    EXPECT_EQ(tensor_diff(*r.layers[l].conv_checkpoint, r.layers[l].conv, "conv_checkpoint"), "");
  }
}

TEST_P(GdnRollback, CommitAllKeepsLiveCommitFewerRestores) {
  const auto& [preset, mode, seed] = GetParam();
  RefCase c(preset, mode, seed);
  SCOPED_TRACE(c.name());
  c.backend->alloc(0);
  c.backend->verify({0}, 4, VerifyArm::exact, {c.inputs(2, 4)});
  const SequenceState v = c.backend->export_state(0);
  c.backend->commit(0, 4, 4);
  EXPECT_EQ(state_diff(c.backend->export_state(0), v, false), "");
  c.backend->commit(0, 3, 4);
  const SequenceState r = c.backend->export_state(0);
  EXPECT_EQ(tensor_diff(r.layers[0].h, v.layers[0].h_intermediates[2], "h"), "");
}

TEST(GdnRollback, RollbackZeroWithoutCheckpointChangesNothing) {
  RefCase c("tiny", HMode::f32, 3);
  c.backend->alloc(0);
  c.backend->prefill(0, c.inputs(1, 3));
  const SequenceState before = c.backend->export_state(0);
  c.backend->rollback(0, 0, false);  // "each half only if allocated"
  EXPECT_EQ(state_diff(c.backend->export_state(0), before, false), "");
}

INSTANTIATE_TEST_SUITE_P(Grid, GdnRollback, ref_grid(), ref_param_name);

}  // namespace ssm::test
