// reference/to_f16.cpp and the FP16 store rules of STATE-MODEL section 6.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "tests/support/ref_harness.h"

namespace ssm::test {

TEST(GdnToF16, ConvertsEveryLayerWithTheConverterOnce) {
  RefCase c("odd-d", HMode::f16, 4);
  c.backend->alloc(0);
  c.backend->prefill(0, c.inputs(1, 3));
  const SequenceState fp32 = c.backend->export_state(0);
  ASSERT_FALSE(fp32.layers[0].h_is_f16);
  c.backend->to_f16(0);
  const SequenceState fp16 = c.backend->export_state(0);
  for (size_t l = 0; l < fp16.layers.size(); ++l) {
    ASSERT_TRUE(fp16.layers[l].h_is_f16);
    ASSERT_EQ(fp16.layers[l].h.dtype(), DType::f16);
    for (int64_t i = 0; i < fp16.layers[l].h.size(); ++i)
      ASSERT_EQ(fp16.layers[l].h.f16()[i], float_to_half_rne(fp32.layers[l].h.f32()[i]));
  }
  try {
    c.backend->to_f16(0);
    FAIL() << "to_f16 twice accepted";
  } catch (const StateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::to_f16_twice);
  }
}

TEST(GdnToF16, FirstDecodeConvertsImplicitly) {
  RefCase a("tiny", HMode::f16, 6), b("tiny", HMode::f16, 6);
  for (RefCase* c : {&a, &b}) {
    c->backend->alloc(0);
    c->backend->prefill(0, c->inputs(1, 4));
  }
  b.backend->to_f16(0);
  a.backend->decode({0}, {a.inputs(2, 1)});
  b.backend->decode({0}, {b.inputs(2, 1)});
  EXPECT_EQ(state_diff(a.backend->export_state(0), b.backend->export_state(0), true), "");
}

TEST(GdnToF16, OnlyInF16Mode) {
  for (HMode mode : {HMode::f32, HMode::f16_pool}) {
    RefCase c("tiny", mode, 1);
    c.backend->alloc(0);
    try {
      c.backend->to_f16(0);
      FAIL() << to_string(mode);
    } catch (const StateError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::wrong_mode);
    }
  }
}

TEST(GdnToF16, ConverterDoesNotSaturateButKernelStoresDo) {
  // value_scale drives |h| past the FP16 range; g ~ 1 keeps it there
  RefCase c("tiny", HMode::f16, 8);
  c.gen.value_scale = 3e5;
  c.gen.decay = 0.0;
  c.backend->create_pool(make_model(c.spec, c.gen), c.pool);
  c.backend->alloc(0);
  c.backend->prefill(0, c.inputs(1, 6));
  const SequenceState s32 = c.backend->export_state(0);
  bool over = false;
  for (int64_t i = 0; i < s32.layers[0].h.size(); ++i) over |= std::abs(s32.layers[0].h.f32()[i]) >= 65520.0f;
  ASSERT_TRUE(over) << "the case does not reach the FP16 range; raise value_scale";

  c.backend->to_f16(0);  // the converter: overflow gives inf
  const SequenceState s16 = c.backend->export_state(0);
  int infs = 0;
  for (int64_t i = 0; i < s16.layers[0].h.size(); ++i) infs += !half_is_finite(s16.layers[0].h.f16()[i]);
  EXPECT_GT(infs, 0);

  c.backend->decode({0}, {c.inputs(2, 1)});  // kernel stores: clamp, NaN (inf - inf) -> -65504
  const SequenceState d = c.backend->export_state(0);
  int at_max = 0, at_min = 0;
  for (const LayerState& l : d.layers)
    for (int64_t i = 0; i < l.h.size(); ++i) {
      ASSERT_TRUE(half_is_finite(l.h.f16()[i])) << "element " << i;
      at_max += l.h.f16()[i] == 0x7bff;
      at_min += l.h.f16()[i] == 0xfbff;
    }
  EXPECT_GT(at_max + at_min, 0);
}

TEST(GdnToF16, F16PoolDecodesSaturateExactly) {
  RefCase c("odd-a", HMode::f16_pool, 12);
  c.gen.value_scale = 3e5;
  c.gen.decay = 0.0;
  c.backend->create_pool(make_model(c.spec, c.gen), c.pool);
  c.backend->alloc(0);
  for (int t = 0; t < 6; ++t) c.backend->decode({0}, {c.inputs(t, 1)});
  const SequenceState d = c.backend->export_state(0);
  int clamped = 0;
  for (const LayerState& l : d.layers)
    for (int64_t i = 0; i < l.h.size(); ++i) {
      ASSERT_TRUE(half_is_finite(l.h.f16()[i]));
      clamped += (l.h.f16()[i] & 0x7fff) == 0x7bff;
    }
  EXPECT_GT(clamped, 0);
}

}  // namespace ssm::test
