// reference/decode.cpp: batched decode with padding equals one-by-one; padding rows never
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

// FP16 state stores beyond 65504: the contract's saturating store gives +-65504 (0x7bff/0xfbff);
// F16Store::inf (triton's and torch's conversion) gives +-inf at exactly those elements and the
// same bits everywhere else.
TEST(GdnDecodeF16Store, SaturateAndInfDifferOnlyWhereTheStoreOverflows) {
  const uint64_t seed = 0;  // the case a vLLM campaign found (docs/plugins.md, "Third-party kernels")
  SCOPED_TRACE("seed=" + std::to_string(seed));
  GenConfig gen;
  gen.seed = seed;
  gen.decay = 0.1;
  gen.value_scale = 2e5;  // max|h| ~ 0.7 x value_scale: past 65504 after one token
  PoolConfig pool;
  pool.h_mode = HMode::f16_pool;
  std::vector<Tensor> h;
  for (F16Store store : {F16Store::saturate, F16Store::inf}) {
    ModelSpec spec = make_preset("odd-d");
    for (LayerSpec& l : spec.layers) l.numerics.f16_store = store;
    ref::ReferenceBackend b;
    b.create_pool(make_model(spec, gen), pool);
    b.alloc(0);
    b.decode({0}, {make_inputs(spec, gen, 0, 0, 0, 1)});
    for (const LayerState& L : b.export_state(0).layers) h.push_back(L.h);
  }
  ASSERT_EQ(h.size() % 2, 0u);
  const size_t layers = h.size() / 2;
  int overflowed = 0;
  for (size_t l = 0; l < layers; ++l)
    for (int64_t i = 0; i < h[l].size(); ++i) {
      const uint16_t sat = h[l].f16()[i], inf = h[layers + l].f16()[i];
      if ((sat & 0x7fff) == 0x7bff && (inf & 0x7fff) == 0x7c00) {
        EXPECT_EQ(sat & 0x8000, inf & 0x8000) << "layer " << l << " element " << i;
        ++overflowed;
      } else {
        EXPECT_EQ(sat, inf) << "layer " << l << " element " << i;
      }
    }
  EXPECT_GT(overflowed, 0) << "no store overflowed: raise value_scale";
}

// F16Rows::carried (vLLM's and fla's kernels): the rows of one op carry the state in FP32 and
// outputs read it. A decode's first row starts from the same stored state, so the stored FP16 h is
// the same as the contract's; its output reads the unrounded state, so where the state overflows
// FP16 the output stays finite (the contract's reads the stored inf back and gives NaN: what a
// vLLM campaign showed). Over a verify the rows diverge from the contract's by FP16 roundings only.
TEST(GdnDecodeF16Store, CarriedRowsReadTheFp32State) {
  const uint64_t seed = 0;  // the case of GdnDecodeF16Store.SaturateAndInfDifferOnlyWhereTheStoreOverflows
  SCOPED_TRACE("seed=" + std::to_string(seed));
  GenConfig gen;
  gen.seed = seed;
  gen.decay = 0.1;
  gen.value_scale = 2e5;
  PoolConfig pool;
  pool.h_mode = HMode::f16_pool;
  struct Run {
    std::vector<Tensor> h;
    std::vector<float> out;   // every layer's decode output
    std::vector<float> vout;  // every layer's verify outputs
  };
  std::vector<Run> runs;
  for (F16Rows rows : {F16Rows::stored, F16Rows::carried}) {
    ModelSpec spec = make_preset("odd-d");
    for (LayerSpec& l : spec.layers) {
      l.numerics.f16_store = F16Store::inf;
      l.numerics.f16_rows = rows;
    }
    ref::ReferenceBackend b;
    b.create_pool(make_model(spec, gen), pool);
    b.alloc(0);
    Run r;
    const std::vector<StepOutputs> decoded = b.decode({0}, {make_inputs(spec, gen, 0, 0, 0, 1)});
    for (const auto& layer : decoded[0].layers) r.out.insert(r.out.end(), layer.begin(), layer.end());
    for (const LayerState& L : b.export_state(0).layers) r.h.push_back(L.h);
    GenConfig small = gen;  // a verify on ordinary values: both conventions stay finite
    small.value_scale = 1;
    ref::ReferenceBackend v;
    v.create_pool(make_model(spec, small), pool);
    v.alloc(0);
    v.prefill(0, make_inputs(spec, small, 0, 0, 0, 3));
    const std::vector<StepOutputs> verified = v.verify({0}, 4, VerifyArm::exact, {make_inputs(spec, small, 1, 0, 0, 4)});
    for (const auto& layer : verified[0].layers) r.vout.insert(r.vout.end(), layer.begin(), layer.end());
    runs.push_back(std::move(r));
  }
  for (size_t l = 0; l < runs[0].h.size(); ++l) EXPECT_TRUE(runs[0].h[l].bit_equal(runs[1].h[l])) << "layer " << l;
  int nan_stored = 0, finite_carried_there = 0;
  for (size_t i = 0; i < runs[0].out.size(); ++i) {
    if (std::isnan(runs[0].out[i])) {
      ++nan_stored;
      finite_carried_there += std::isfinite(runs[1].out[i]);
    }
    EXPECT_FALSE(std::isnan(runs[1].out[i])) << "carried output " << i;
  }
  EXPECT_GT(nan_stored, 0) << "the stored convention no longer reads an overflowed state: pick another case";
  EXPECT_EQ(finite_carried_there, nan_stored);
  double worst = 0;
  for (size_t i = 0; i < runs[0].vout.size(); ++i) {
    ASSERT_TRUE(std::isfinite(runs[0].vout[i]) && std::isfinite(runs[1].vout[i])) << i;
    worst = std::max(worst, std::fabs(double(runs[0].vout[i]) - double(runs[1].vout[i])) /
                                (1.0 + std::fabs(double(runs[0].vout[i]))));
  }
  EXPECT_GT(worst, 0.0) << "carried rows computed exactly what stored rows did";
  EXPECT_LT(worst, 0.05) << "carried rows differ from stored ones by more than FP16 roundings";
}

}  // namespace ssm::test
