// reference/prefill.cpp: prefill(T) equals T FP32 steps; f16-pool prefill equals
// widen + FP32 prefill + narrow (checked against f16 mode, which widens and later narrows).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/support/ref_harness.h"

namespace ssm::test {

class GdnPrefill : public ::testing::TestWithParam<std::tuple<std::string, uint64_t>> {};

TEST_P(GdnPrefill, PrefillEqualsDecodesInFp32) {
  const auto& [preset, seed] = GetParam();
  RefCase a(preset, HMode::f32, seed), b(preset, HMode::f32, seed);
  SCOPED_TRACE(a.name());
  a.backend->alloc(0);
  b.backend->alloc(0);
  const StepInputs rows = a.inputs(1, 6);
  const StepOutputs out = a.backend->prefill(0, rows);
  for (int t = 0; t < 6; ++t) {
    const auto d = b.backend->decode({0}, {slice_rows(b.spec, rows, t, 1)});
    const size_t w = size_t(b.spec.layers[0].out_dim());
    EXPECT_TRUE(std::equal(d[0].layers[0].begin(), d[0].layers[0].end(), out.layers[0].begin() + long(t * w)));
  }
  EXPECT_EQ(state_diff(a.backend->export_state(0), b.backend->export_state(0), true), "");
}

TEST_P(GdnPrefill, F16PoolPrefillEqualsWidenFp32PrefillNarrow) {
  const auto& [preset, seed] = GetParam();
  RefCase pool(preset, HMode::f16_pool, seed), f16(preset, HMode::f16, seed), f32(preset, HMode::f32, seed);
  SCOPED_TRACE(pool.name());
  for (RefCase* c : {&pool, &f16, &f32}) c->backend->alloc(0);
  // first turn: from zero
  const StepInputs p1 = pool.inputs(1, 5);
  pool.backend->prefill(0, p1);
  f32.backend->prefill(0, p1);
  const SequenceState sp = pool.backend->export_state(0), s32 = f32.backend->export_state(0);
  ASSERT_TRUE(sp.h_prefill_stage.has_value());
  for (size_t l = 0; l < sp.layers.size(); ++l) {
    ASSERT_TRUE(sp.layers[l].h_is_f16);
    for (int64_t i = 0; i < sp.layers[l].h.size(); ++i)
      ASSERT_EQ(sp.layers[l].h.f16()[i], float_to_half_rne(s32.layers[l].h.f32()[i])) << "layer " << l << " elem " << i;
  }
  // the stage holds the last layer's FP32 result
  const Tensor& last = s32.layers.back().h;
  for (int64_t i = 0; i < last.size(); ++i) ASSERT_EQ(sp.h_prefill_stage->f32()[i], last.f32()[i]);

  // decode on FP16, then a continuation prefill: f16 mode widens exactly, runs FP32, and the
  // next to_f16 narrows with the same converter
  f16.backend->prefill(0, p1);
  for (RefCase* c : {&pool, &f16}) {
    c->backend->decode({0}, {c->inputs(2, 1)});
    c->backend->decode({0}, {c->inputs(3, 1)});
  }
  EXPECT_EQ(state_diff(pool.backend->export_state(0), f16.backend->export_state(0), true), "");
  for (RefCase* c : {&pool, &f16}) c->backend->prefill(0, c->inputs(4, 7));
  ASSERT_FALSE(f16.backend->export_state(0).layers[0].h_is_f16);  // widened back to FP32
  f16.backend->to_f16(0);
  EXPECT_EQ(state_diff(pool.backend->export_state(0), f16.backend->export_state(0), true), "");
}

INSTANTIATE_TEST_SUITE_P(Presets, GdnPrefill,
                         ::testing::Combine(::testing::Values("tiny", "odd-a", "odd-b", "odd-c", "odd-d"),
                                            ::testing::Values(uint64_t(5), uint64_t(77))));

TEST(GdnPrefill, Qwen3NextShapesRunThroughEveryMode) {
  for (HMode mode : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    ssm::ModelSpec spec = make_preset("qwen3-next-80b", 1);
    ref::ReferenceBackend be;
    PoolConfig pool;
    pool.h_mode = mode;
    pool.max_slots = 1;
    pool.conv_capacity = 3;
    GenConfig g;
    g.seed = 9;
    be.create_pool(make_model(spec, g), pool);
    be.alloc(0);
    be.prefill(0, make_inputs(spec, g, 0, 0, 0, 2));
    be.verify({0}, 3, VerifyArm::exact, {make_inputs(spec, g, 1, 0, 0, 3)});
    be.commit(0, 2, 3);
    const SequenceState s = be.export_state(0);
    EXPECT_EQ(s.layers[0].h.shape(), (std::vector<int64_t>{32, 128, 128}));
    EXPECT_EQ(s.layers[0].h.dtype(), mode == HMode::f32 ? DType::f32 : DType::f16);
    double norm = 0;
    for (int64_t i = 0; i < s.layers[0].h.size(); ++i) norm += std::abs(s.layers[0].h.get(i));
    EXPECT_GT(norm, 0.0) << to_string(mode);
    EXPECT_TRUE(std::isfinite(norm)) << to_string(mode);
  }
}

}  // namespace ssm::test
