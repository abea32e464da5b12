// Every error of STATE-MODEL section 4 is raised before any state changes: all bytes of every
// claimed slot (every layer, every field) are unchanged after a refused op.
#include <gtest/gtest.h>

#include <cmath>

#include <functional>

#include "core/errors.h"
#include "tests/support/ref_harness.h"
#include "tests/support/ref_params.h"

namespace ssm::test {

class ContractErrors : public ::testing::TestWithParam<RefParam> {};

TEST_P(ContractErrors, EveryErrorLeavesEveryByteUnchanged) {
  const auto& [preset, mode, seed] = GetParam();
  // slots: 0 has capacity 3, 1 has capacity 1
  RefCase c(preset, mode, seed, 3, 2);
  c.pool.h_capacity = {3, 1};
  c.backend->create_pool(make_model(c.spec, c.gen), c.pool);
  SCOPED_TRACE(c.name());
  ref::ReferenceBackend& be = *c.backend;
  be.alloc(0);  // slot 1 (capacity 1 is the smallest)
  be.alloc(0);  // slot 0
  be.prefill(0, c.inputs(1, 3));
  be.prefill(1, c.inputs(1, 2, 1));
  be.checkpoint(1, false);
  be.verify({0}, 3, VerifyArm::exact, {c.inputs(2, 3)});
  if (mode == HMode::f16) {
    be.decode({1}, {c.inputs(3, 1, 1)});  // slot 1: FP16 h over an FP32 checkpoint
  }
  StepInputs nan_in = c.inputs(4, 1);
  nan_in.layers.back().gate_in[0] = std::nanf("");
  StepInputs short_in = c.inputs(4, 1);
  short_in.layers[0].conv_in.pop_back();

  struct Case {
    std::string what;
    ErrorKind kind;
    std::function<void()> op;
  };
  std::vector<Case> cases = {
      {"commit n > k", ErrorKind::commit_n_gt_k, [&] { be.commit(0, 4, 3); }},
      {"commit n == 0", ErrorKind::commit_zero, [&] { be.commit(0, 0, 3); }},
      {"commit k not the last verify's", ErrorKind::commit_k_mismatch, [&] { be.commit(0, 2, 4); }},
      {"commit without verify", ErrorKind::commit_k_mismatch, [&] { be.commit(1, 1, 2); }},
      {"verify K above capacity", ErrorKind::capacity, [&] { be.verify({1}, 3, VerifyArm::exact, {c.inputs(5, 3)}); }},
      {"batched verify, one row above capacity", ErrorKind::capacity,
       [&] { be.verify({0, 1}, 3, VerifyArm::wy, {c.inputs(5, 3), c.inputs(5, 3, 1)}); }},
      {"rollback past the last verify's intermediates", ErrorKind::rollback_range, [&] { be.rollback(0, 3, false); }},
      {"rollback beyond capacity", ErrorKind::rollback_range, [&] { be.rollback(1, 2, true); }},
      {"rollback without a verify", ErrorKind::rollback_range, [&] { be.rollback(1, 1, false); }},
      {"decode on a free slot", ErrorKind::bad_slot, [&] { be.decode({0, 2}, {c.inputs(5, 1), c.inputs(5, 1)}); }},
      {"slot twice in a batch", ErrorKind::bad_slot, [&] { be.decode({0, 0}, {c.inputs(5, 1), c.inputs(5, 1)}); }},
      {"NaN input", ErrorKind::bad_input, [&] { be.decode({1, 0}, {c.inputs(5, 1), nan_in}); }},
      {"short input", ErrorKind::bad_input, [&] { be.prefill(0, short_in); }},
      {"pool exhausted", ErrorKind::pool_exhausted, [&] { be.alloc(0); }},
      {"snapshot never saved", ErrorKind::snapshot_empty, [&] { be.snapshot_restore(0, 0); }},
  };
  if (mode == HMode::f16) {
    cases.push_back({"to_f16 twice", ErrorKind::to_f16_twice, [&] { be.to_f16(1); }});
    cases.push_back({"rollback 0 onto FP16 h from an FP32 checkpoint", ErrorKind::dtype_mismatch,
                     [&] { be.rollback(1, 0, false); }});
  } else {
    cases.push_back({"to_f16 outside f16 mode", ErrorKind::wrong_mode, [&] { be.to_f16(0); }});
  }
  for (const Case& k : cases) {
    const SequenceState s0 = be.export_state(0), s1 = be.export_state(1);
    try {
      k.op();
      ADD_FAILURE() << k.what << ": accepted";
    } catch (const StateError& e) {
      EXPECT_EQ(e.kind(), k.kind) << k.what << ": " << e.what();
    }
    EXPECT_EQ(state_diff(be.export_state(0), s0, false), "") << k.what;
    EXPECT_EQ(state_diff(be.export_state(1), s1, false), "") << k.what;
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, ContractErrors, ref_grid(), ref_param_name);

}  // namespace ssm::test
