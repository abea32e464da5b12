// compare_state / compare_outputs on states the reference produces: equal runs pass, and each
// kind of difference (a bit of conv, ULPs of an FP16 intermediate, flags, presence, counts,
// outputs) fails with the field, layer and class named.
#include <gtest/gtest.h>

#include <cmath>

#include "compare/compare.h"
#include "compare/field_cache.h"
#include "core/runner.h"
#include "core/state_digest.h"
#include "core/state_fields.h"
#include "fixtures/generators.h"
#include "reference/reference_backend.h"

namespace ssm::cmp {
namespace {

struct ScriptRun {
  SequenceState state;
  std::vector<OpResult> results;
};

ScriptRun run_script(const std::string& preset, HMode mode, uint64_t seed, const std::string& ops) {
  const ModelSpec spec = make_preset(preset);
  GenConfig g;
  g.seed = seed;
  PoolConfig pool;
  pool.h_mode = mode;
  ref::ReferenceBackend b;
  b.create_pool(make_model(spec, g), pool);
  Runner r(b, input_source(spec, g));
  ScriptRun out;
  const auto script = parse_script(ops);
  for (size_t i = 0; i < script.size(); ++i) out.results.push_back(r.run(script[i], int(i)));
  out.state = b.export_state(r.slot_of(0));
  return out;
}

const char* kOps = "alloc; prefill 7; checkpoint; decode; verify 4";

Where base() {
  Where w;
  w.op_index = 4;
  w.op = "verify 4";
  w.seq = 0;
  return w;
}

bool has_failure(const StateReport& r, const std::string& tensor, int layer) {
  for (const auto& f : r.failures)
    if (f.where.tensor == tensor && f.where.layer == layer) return true;
  return false;
}

class compare_state_modes : public ::testing::TestWithParam<HMode> {};

TEST_P(compare_state_modes, identical_runs_pass_under_both_strictnesses) {
  const uint64_t seed = 21;
  SCOPED_TRACE("seed=" + std::to_string(seed) + " mode=" + to_string(GetParam()));
  const ScriptRun a = run_script("odd-a", GetParam(), seed, kOps);
  const ScriptRun b = run_script("odd-a", GetParam(), seed, kOps);
  const StateReport r = compare_state(a.state, b.state, Tolerances::defaults(), base());
  EXPECT_TRUE(r.pass()) << r.text();
  // 2 layers x (h, conv, 2 checkpoints, 3+3 intermediates) (+ stage in f16-pool)
  EXPECT_EQ(r.tensors, 2 * 10 + (GetParam() == HMode::f16_pool ? 1 : 0));
  EXPECT_TRUE(compare_state(a.state, b.state, Tolerances::defaults(), base(), Strictness::bitwise).pass());
}

INSTANTIATE_TEST_SUITE_P(modes, compare_state_modes, ::testing::Values(HMode::f32, HMode::f16, HMode::f16_pool),
                         [](const auto& info) { return std::string(info.param == HMode::f16_pool ? "f16_pool" : to_string(info.param)); });

TEST(compare_state, one_bit_of_conv_is_an_exact_failure) {
  const uint64_t seed = 22;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun a = run_script("tiny", HMode::f32, seed, kOps);
  SequenceState got = a.state;
  got.layers[1].conv_intermediates[2].f32()[13] = std::nextafter(got.layers[1].conv_intermediates[2].f32()[13], 9.0f);
  const StateReport r = compare_state(a.state, got, Tolerances::defaults(), base());
  ASSERT_EQ(r.failures.size(), 1u) << r.text();
  const TensorReport& f = r.failures[0];
  EXPECT_EQ(f.where.tensor, "conv_intermediate[2]");
  EXPECT_EQ(f.where.layer, 1);
  EXPECT_EQ(f.cls, TolClass::exact);
  EXPECT_EQ(f.worst.at(0).index, (std::vector<int64_t>{3, 1}));  // channel 3, col 1 of d_conv 4
  EXPECT_NE(r.text().find("op 4 'verify 4'"), std::string::npos) << r.text();
}

// An implementation that keeps d_conv-1 conv columns (causal_conv1d's convention, a plug-in's
// SSMP_CONV_WINDOW_D_CONV_MINUS_1) has no column 0: it is not compared, every other column is.
TEST(compare_state, a_d_conv_minus_1_window_is_compared_on_the_columns_it_keeps) {
  const uint64_t seed = 23;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun a = run_script("tiny", HMode::f32, seed, kOps);
  SequenceState got = a.state;
  const int D = got.layers[0].conv.shape()[1];
  for (LayerState& L : got.layers) {
    L.conv_oldest_column_absent = true;
    for (Tensor* t : {&L.conv, &*L.conv_checkpoint, &L.conv_intermediates[1]})
      for (int64_t c = 0; c < t->shape()[0]; ++c) t->f32()[c * D] = 12345.0f;  // column 0: not kept
  }
  EXPECT_TRUE(compare_state(a.state, got, Tolerances::defaults(), base()).pass());
  got.layers[1].conv_checkpoint->f32()[5 * D + 1] += 1.0f;  // column 1 is kept: compared
  const StateReport r = compare_state(a.state, got, Tolerances::defaults(), base());
  ASSERT_EQ(r.failures.size(), 1u) << r.text();
  EXPECT_EQ(r.failures[0].where.tensor, "conv_checkpoint");
  EXPECT_EQ(r.failures[0].worst.at(0).index, (std::vector<int64_t>{5, 0}));  // column 1 is column 0 of what is kept
  // without the flag, the same column-0 difference is a failure
  got = a.state;
  got.layers[0].conv.f32()[0] += 1.0f;
  EXPECT_FALSE(compare_state(a.state, got, Tolerances::defaults(), base()).pass());
}

// An implementation with no FP32 prefill staging blob (SSMP_NO_PREFILL_STAGE: vLLM's and fla's
// kernels widen FP16 state in registers) is not compared on h_prefill_stage; every other field is.
TEST(compare_state, no_prefill_stage_skips_the_stage_only) {
  const uint64_t seed = 23;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun a = run_script("tiny", HMode::f16_pool, seed, kOps);
  ASSERT_TRUE(a.state.h_prefill_stage.has_value());
  SequenceState got = a.state;
  got.h_prefill_stage.reset();
  EXPECT_TRUE(has_failure(compare_state(a.state, got, Tolerances::defaults(), base()), "h_prefill_stage", -1));
  got.prefill_stage_absent = true;
  EXPECT_TRUE(compare_state(a.state, got, Tolerances::defaults(), base()).pass());
  got.layers[0].h.f16()[3] = uint16_t(got.layers[0].h.f16()[3] ^ 0x4000);  // h is still compared
  EXPECT_FALSE(compare_state(a.state, got, Tolerances::defaults(), base()).pass());
}

TEST(compare_state, f16_intermediate_ulps_classes_vs_bitwise) {
  const uint64_t seed = 23;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun a = run_script("tiny", HMode::f16, seed, kOps);
  ASSERT_TRUE(a.state.layers[0].h_is_f16);
  SequenceState got = a.state;
  Tensor& t = got.layers[0].h_intermediates[1];
  ASSERT_EQ(t.dtype(), DType::f16);
  t.f16()[5] = uint16_t(t.f16()[5] + 1);
  EXPECT_TRUE(compare_state(a.state, got, Tolerances::defaults(), base()).pass());
  const StateReport bw = compare_state(a.state, got, Tolerances::defaults(), base(), Strictness::bitwise);
  EXPECT_TRUE(has_failure(bw, "h_intermediate[1]", 0)) << bw.text();
  t.f16()[5] = float_to_half_rne(half_to_float(t.f16()[5]) + 0.25f);  // far beyond rounding noise
  const StateReport r = compare_state(a.state, got, Tolerances::defaults(), base());
  ASSERT_EQ(r.failures.size(), 1u) << r.text();
  EXPECT_EQ(r.failures[0].cls, TolClass::fp16_state);
  EXPECT_EQ(r.failures[0].where.tensor, "h_intermediate[1]");
  EXPECT_GT(r.failures[0].worst.at(0).ulp_scaled, Tolerances::defaults().fp16_state.max_ulp);
}

TEST(compare_state, flags_presence_and_counts) {
  const uint64_t seed = 24;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun a = run_script("tiny", HMode::f16, seed, kOps);
  const Tolerances tol = Tolerances::defaults();
  {
    SequenceState got = a.state;
    got.layers[1].h_is_f16 = false;
    const StateReport r = compare_state(a.state, got, tol, base());
    EXPECT_TRUE(has_failure(r, "h_is_f16", 1)) << r.text();
  }
  {
    SequenceState got = a.state;
    got.layers[0].conv_checkpoint.reset();
    const StateReport r = compare_state(a.state, got, tol, base());
    EXPECT_TRUE(has_failure(r, "conv_checkpoint", 0)) << r.text();
    EXPECT_NE(r.text().find("present in ref: yes, in got: no"), std::string::npos) << r.text();
  }
  {
    SequenceState got = a.state;
    got.last_verify_k = 3;
    got.layers[0].h_intermediates.pop_back();
    const StateReport r = compare_state(a.state, got, tol, base());
    EXPECT_TRUE(has_failure(r, "last_verify_k", -1)) << r.text();
    EXPECT_TRUE(has_failure(r, "h_intermediates", 0)) << r.text();
  }
  {
    SequenceState got = a.state;
    got.layers.pop_back();
    EXPECT_TRUE(has_failure(compare_state(a.state, got, tol, base()), "layers", -1));
  }
  {  // FP32 bytes where FP16 were expected: a dtype failure of h, not a crash
    SequenceState got = a.state;
    Tensor h32 = Tensor::zeros(DType::f32, got.layers[0].h.shape());
    for (int64_t i = 0; i < h32.size(); ++i) h32.f32()[i] = got.layers[0].h.get(i);
    got.layers[0].h = h32;
    const StateReport r = compare_state(a.state, got, tol, base());
    EXPECT_TRUE(has_failure(r, "h", 0)) << r.text();
  }
}

TEST(compare_state, fresh_zero_state_passes_only_against_zeros) {
  const ScriptRun a = run_script("tiny", HMode::f16_pool, 25, "alloc");
  EXPECT_TRUE(compare_state(a.state, a.state, Tolerances::defaults(), base()).pass());
  SequenceState got = a.state;
  got.h_prefill_stage->f32()[3] = 1e-12f;
  const StateReport r = compare_state(a.state, got, Tolerances::defaults(), base());
  EXPECT_TRUE(has_failure(r, "h_prefill_stage", -1)) << r.text();
}

TEST(compare_outputs, output_row_head_col_and_zero_reference) {
  const uint64_t seed = 26;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun a = run_script("odd-b", HMode::f32, seed, kOps);
  const ModelSpec spec = make_preset("odd-b");
  const StepOutputs& ref = a.results[4].outputs.at(0);  // verify 4: 4 rows
  ASSERT_EQ(ref.rows, 4);
  EXPECT_TRUE(compare_outputs(spec, ref, ref, Tolerances::defaults(), base()).pass());
  StepOutputs got = ref;
  const LayerSpec& s = spec.layers[2];
  const size_t e = size_t(2) * size_t(s.out_dim()) + size_t(1) * size_t(s.vd) + 4;  // row 2, head 1, col 4
  got.layers[2][e] += 0.5f;
  const StateReport r = compare_outputs(spec, ref, got, Tolerances::defaults(), base());
  ASSERT_EQ(r.failures.size(), 1u) << r.text();
  EXPECT_EQ(r.failures[0].where.layer, 2);
  EXPECT_EQ(r.failures[0].cls, TolClass::output);
  EXPECT_EQ(r.failures[0].worst.at(0).index, (std::vector<int64_t>{2, 1, 4}));
  EXPECT_NE(r.failures[0].text().find("(row, head, col)"), std::string::npos);
  StepOutputs zero = ref;
  for (auto& l : zero.layers) std::fill(l.begin(), l.end(), 0.0f);
  // an all-zero reference output fails when got is not bit for bit the same, even within atol
  StepOutputs near = zero;
  for (auto& l : near.layers) l[1] = 1e-7f;
  const StateReport z = compare_outputs(spec, zero, near, Tolerances::defaults(), base());
  EXPECT_EQ(z.failures.size(), spec.layers.size()) << "an all-zero reference output must fail";
  // ...and passes against identical bits, in every strictness: no tolerance is used (found by
  // `fuzz --seed 3 --cases 3000`, case 2955, against the alternate path: compare_tensor's test)
  EXPECT_TRUE(compare_outputs(spec, zero, zero, Tolerances::defaults(), base()).pass());
  EXPECT_TRUE(compare_outputs(spec, zero, zero, Tolerances::defaults(), base(), Strictness::bitwise).pass());
  // ...unless the model certifies it with an all-zero condition (found by an f16-pool H200
  // campaign: `alloc; prefill 1` at value scale 60000, where silu underflows every V channel of
  // odd-d's layer 1 to 0); got must then be all zero as well
  zero.condition = zero.layers;
  EXPECT_TRUE(compare_outputs(spec, zero, zero, Tolerances::defaults(), base()).pass());
  StepOutputs almost = zero;
  almost.layers[0][3] = 1e-30f;
  EXPECT_FALSE(compare_outputs(spec, zero, almost, Tolerances::defaults(), base()).pass());
  // ...or with a condition C whose u C is below FP32's normal range (every term of the value
  // underflows, reference/underflow.h: H200 campaigns of Dec 3 on mamba-odd-c at value scale
  // 60000); got must then be zero within the class's term cond u C, element by element
  StepOutputs underflow = zero;
  for (auto& l : underflow.condition) std::fill(l.begin(), l.end(), 1e-33f);  // 32 u C = 1.9e-39
  StepOutputs tiny = underflow;
  tiny.layers[0][3] = -1e-39f;  // within 1.9e-39
  EXPECT_TRUE(compare_outputs(spec, underflow, tiny, Tolerances::defaults(), base()).pass());
  tiny.layers[0][3] = 4e-39f;  // beyond it
  EXPECT_FALSE(compare_outputs(spec, underflow, tiny, Tolerances::defaults(), base()).pass());
  for (auto& l : underflow.condition) std::fill(l.begin(), l.end(), 1e-28f);  // u C = 6e-36: normal size
  StepOutputs small = underflow;
  small.layers[0][3] = 1e-36f;  // within atol: only the zero-reference rule refuses it
  EXPECT_FALSE(compare_outputs(spec, underflow, small, Tolerances::defaults(), base()).pass())
      << "an all-zero output whose terms are not all below FP32's normal range must still fail";
  // an exact arm (bitwise) certifies nothing by u C: its all-zero output with a tiny non-zero
  // condition (value scale 2000 on mamba-odd-c) agrees only by identical bits
  StepOutputs exact_zero = zero;
  for (auto& l : exact_zero.condition) std::fill(l.begin(), l.end(), 1e-33f);
  EXPECT_TRUE(compare_outputs(spec, exact_zero, exact_zero, Tolerances::defaults(), base(), Strictness::bitwise).pass());
  StepOutputs exact_off = exact_zero;
  exact_off.layers[0][3] = -0.0f;
  EXPECT_FALSE(compare_outputs(spec, exact_zero, exact_off, Tolerances::defaults(), base(), Strictness::bitwise).pass());
  got.rows = 3;
  EXPECT_FALSE(compare_outputs(spec, ref, got, Tolerances::defaults(), base()).pass());
}

// `replay` compares a trace (no condition) against ssmcheck's recomputation (which has one):
// the condition is used from whichever side computed it.
TEST(compare_outputs, condition_is_taken_from_either_side) {
  const ScriptRun a = run_script("odd-b", HMode::f32, 28, kOps);
  const ModelSpec spec = make_preset("odd-b");
  StepOutputs with = a.results[4].outputs.at(0);
  ASSERT_EQ(with.condition.size(), spec.layers.size()) << "the reference computes the condition";
  StepOutputs without = with;
  without.condition.clear();
  // a synthetic ill-conditioned element: C = 1e6 allows cond u C = 1.9 there, far beyond
  // atol + rtol |ref|; an error of half that passes only when the condition is used
  const size_t e = 5;
  with.condition[0][e] = 1e6f;
  const Tolerance& t = Tolerances::defaults().output;
  const double err = 0.5 * t.cond * kUnitRoundoffF32 * 1e6;
  ASSERT_GT(err, 10 * (t.atol + t.rtol * std::fabs(with.layers[0][e])));
  StepOutputs off = without;
  off.layers[0][e] += float(err);
  EXPECT_FALSE(compare_outputs(spec, without, off, Tolerances::defaults(), base()).pass());
  StepOutputs off_with = with;
  off_with.layers[0][e] += float(err);
  EXPECT_TRUE(compare_outputs(spec, without, off_with, Tolerances::defaults(), base()).pass());
  EXPECT_TRUE(compare_outputs(spec, off_with, with, Tolerances::defaults(), base()).pass());
}

// The state's condition (core/state.h HCondition): the reference carries it with every copy of h,
// compare_state takes it from either side, and it widens fp32-state by cond * u * rho_j in
// column j; a condition of the wrong shape is refused by name.
TEST(compare_state, state_condition_travels_with_copies_and_widens_fp32_state) {
  const uint64_t seed = 29;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const ScriptRun cp = run_script("odd-a", HMode::f32, seed, "alloc; prefill 7; checkpoint");
  const LayerState& c0 = cp.state.layers[0];
  ASSERT_TRUE(c0.condition.h && c0.condition.h_checkpoint);
  EXPECT_EQ(c0.condition.h->shape(), (std::vector<int64_t>{c0.h.shape()[0], c0.h.shape()[2]}));
  EXPECT_TRUE(c0.condition.h->bit_equal(*c0.condition.h_checkpoint)) << "a checkpoint copies the condition";
  float lo = 1e30f;
  for (int64_t i = 0; i < c0.condition.h->size(); ++i) lo = std::min(lo, c0.condition.h->f32()[i]);
  EXPECT_GT(lo, 0.0f) << "seven rows leave a rounding error to carry in every column";
  const ScriptRun rb = run_script("odd-a", HMode::f32, seed, "alloc; prefill 7; checkpoint; decode; rollback 0");
  EXPECT_TRUE(rb.state.layers[0].condition.h->bit_equal(*c0.condition.h)) << "a rollback restores the condition";
  const ScriptRun fresh = run_script("odd-a", HMode::f32, seed, "alloc");
  for (int64_t i = 0; i < fresh.state.layers[0].condition.h->size(); ++i)
    ASSERT_EQ(fresh.state.layers[0].condition.h->f32()[i], 0.0f) << "fresh state is exact";

  const ScriptRun a = run_script("odd-a", HMode::f32, seed, kOps);
  ASSERT_EQ(a.state.layers[0].condition.h_intermediates.size(), a.state.layers[0].h_intermediates.size());
  // limits of the condition alone: |d| <= cond u rho_j
  Tolerances t = Tolerances::defaults();
  t.fp32_state = Tolerance{0, 0, 0, 1e9, 8};
  const LayerState& L = a.state.layers[0];
  const int64_t vd = L.h.shape()[2], e = 3 * vd + 5;  // row 3, column 5 of head 0
  const double allowed = 8 * kUnitRoundoffF32 * L.condition.h->f32()[5];
  auto off_by = [&](double frac) {
    SequenceState g = a.state;
    g.layers[0].h.f32()[e] += float(frac * allowed);
    for (auto& l : g.layers) l.condition = HCondition{};  // an implementation computes none
    return g;
  };
  EXPECT_TRUE(compare_state(a.state, off_by(0.5), t, base()).pass());
  const StateReport far = compare_state(a.state, off_by(2.0), t, base());
  EXPECT_TRUE(has_failure(far, "h", 0)) << far.text();
  SequenceState bare = a.state;
  for (auto& l : bare.layers) l.condition = HCondition{};
  EXPECT_FALSE(compare_state(bare, off_by(0.5), t, base()).pass()) << "without a condition only the fixed limits";
  EXPECT_TRUE(compare_state(off_by(0.5), a.state, t, base()).pass()) << "the got side's condition is used";
  SequenceState wrong = a.state;
  wrong.layers[0].condition.h = Tensor::zeros(DType::f32, {3, 3});
  const StateReport bad = compare_state(wrong, a.state, t, base());
  ASSERT_TRUE(has_failure(bad, "h", 0)) << bad.text();
  EXPECT_NE(bad.text().find("condition tensor"), std::string::npos) << bad.text();
}

TEST(compare_state, report_json_and_merge) {
  const ScriptRun a = run_script("tiny", HMode::f32, 27, kOps);
  SequenceState got = a.state;
  got.layers[0].h.f32()[0] += 1.0f;
  StateReport r = compare_state(a.state, got, Tolerances::defaults(), base());
  StateReport total;
  total.merge(r);
  total.merge(compare_state(a.state, a.state, Tolerances::defaults(), base()));
  EXPECT_EQ(total.tensors, 2 * r.tensors);
  EXPECT_EQ(total.failures.size(), 1u);
  const nlohmann::json j = total.json();
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["failures"][0]["tensor"], "h");
  EXPECT_EQ(j["failures"][0]["class"], "fp32-state");
}

// A FieldCache gives a field's earlier passing report again only while the field's reference
// bits, compared bits, condition and class are all unchanged: the reports then equal a fresh
// comparison's, and a change anywhere is compared afresh (and found).
TEST(FieldCacheTest, ReusesOnlyUnchangedPassingFields) {
  const ScriptRun a = run_script("odd-a", HMode::f32, 21, kOps);
  SequenceState b = a.state;
  // a rounding-sized difference in one element of layer 1's h: still passing, not bitwise
  float& e = b.layers[1].h.f32()[17];
  e = std::nextafter(e, 2.0f * e);
  FieldCache cache;
  const StateReport fresh = compare_state(a.state, b, Tolerances::defaults(), base());
  const StateReport first = compare_state(a.state, b, Tolerances::defaults(), base(), Strictness::classes, {}, &cache);
  ASSERT_TRUE(first.pass()) << first.text();
  EXPECT_EQ(cache.reused(), 0);
  Where later = base();
  later.op_index = 9;
  const StateReport again = compare_state(a.state, b, Tolerances::defaults(), later, Strictness::classes, {}, &cache);
  EXPECT_EQ(cache.reused(), again.tensors);  // every field came from the cache
  ASSERT_EQ(again.margins.size(), fresh.margins.size());
  for (size_t i = 0; i < fresh.margins.size(); ++i) {
    EXPECT_EQ(again.margins[i].where.tensor, fresh.margins[i].where.tensor);
    EXPECT_EQ(again.margins[i].where.op_index, 9);  // the reused report says where it is now
    EXPECT_EQ(again.margins[i].error_ratio, fresh.margins[i].error_ratio) << fresh.margins[i].where.tensor;
  }
  // a field changed beyond its tolerance on one side is compared again, and fails
  SequenceState c = b;
  c.layers[0].conv.f32()[3] += 1.0f;
  const int64_t before = cache.reused();
  const StateReport changed = compare_state(a.state, c, Tolerances::defaults(), later, Strictness::classes, {}, &cache);
  EXPECT_FALSE(changed.pass());
  EXPECT_TRUE(has_failure(changed, "conv", 0)) << changed.text();
  EXPECT_EQ(cache.reused() - before, changed.tensors - 1);  // all but the changed field
  // the same bits under another class (bitwise) are compared again, not reused: h of layer 1 fails
  const StateReport strict = compare_state(a.state, b, Tolerances::defaults(), later, Strictness::bitwise, {}, &cache);
  EXPECT_TRUE(has_failure(strict, "h", 1)) << strict.text();
}

// Digests the caller knows (a backend's field digests, by tensor address) stand for the tensors'
// bits in the keys: a known digest that stays the same keeps the report even though the bits
// moved (which is why only a backend's digests of its own exports may be given), a known digest
// that changes compares the field again, and an unknown tensor is hashed.
TEST(FieldCacheTest, KnownDigestsStandForTheBits) {
  const ScriptRun a = run_script("odd-a", HMode::f32, 21, kOps);
  SequenceState b = a.state;
  FieldCache cache;
  auto known = [](const SequenceState& s, uint64_t salt) {
    FieldCache::KnownDigests k;
    for_each_field(s, [&](const FieldKey&, const Tensor& t) { k[&t] = tensor_digest(t) ^ salt; });
    return k;
  };
  cache.know(known(a.state, 7), known(b, 7));  // salted: not the hashed digests
  const StateReport first = compare_state(a.state, b, Tolerances::defaults(), base(), Strictness::classes, {}, &cache);
  ASSERT_TRUE(first.pass()) << first.text();
  // the same digests given while layer 0's conv moved: reused (the digests, not the bits, are the key)
  const FieldCache::KnownDigests same_got = known(b, 7);
  b.layers[0].conv.f32()[3] += 1.0f;
  cache.know(known(a.state, 7), same_got);
  int64_t before = cache.reused();
  const StateReport stale = compare_state(a.state, b, Tolerances::defaults(), base(), Strictness::classes, {}, &cache);
  EXPECT_TRUE(stale.pass()) << stale.text();
  EXPECT_EQ(cache.reused() - before, stale.tensors);
  // digests that changed (here every one): every field compared again, and the conv fails
  cache.know(known(a.state, 7), known(b, 8));
  before = cache.reused();
  const StateReport fresh = compare_state(a.state, b, Tolerances::defaults(), base(), Strictness::classes, {}, &cache);
  EXPECT_EQ(cache.reused(), before);
  EXPECT_TRUE(has_failure(fresh, "conv", 0)) << fresh.text();
  // nothing known: hashed, so the changed conv is compared again and the unchanged fields are not
  cache.know({}, {});
  before = cache.reused();
  const StateReport hashed = compare_state(a.state, b, Tolerances::defaults(), base(), Strictness::classes, {}, &cache);
  EXPECT_TRUE(has_failure(hashed, "conv", 0)) << hashed.text();
  EXPECT_EQ(cache.reused(), before) << "the keys of hashed fields are not those of known digests";
}

// A field with the same contents (both sides' bits, condition, class) as a field that passed in an
// earlier comparison gets that report, named for itself: what compare_tensor gives it afresh, JSON
// for JSON; within one comparison it is not yet found (which field would reuse which would depend
// on the threads), and a checkpoint taken of h (both sides) is reused through h's report.
TEST(FieldCacheTest, ReusesAReportOfTheSameContentUnderAnotherName) {
  const ScriptRun a = run_script("odd-a", HMode::f32, 21, kOps);
  const LayerState& l = a.state.layers[0];
  Tensor got = l.h;
  got.f32()[17] = std::nextafter(got.f32()[17], 2.0f * got.f32()[17]);
  const Tensor& cond = *l.condition.h;
  const TolClass cls = class_of("h", DType::f32);
  ASSERT_EQ(cls, class_of("h_checkpoint", DType::f32));
  Where w = base();
  w.layer = 0;
  w.tensor = "h";
  const TensorReport h = compare_tensor(l.h, got, cls, Tolerances::defaults(), w, true, &cond);
  ASSERT_TRUE(h.pass) << h.text();
  FieldCache cache;
  const FieldCache::Key key{tensor_digest(l.h), tensor_digest(got), tensor_digest(cond), cls};
  cache.keep(0, "h", key, h);
  Where wc = w;
  wc.tensor = "h_checkpoint";
  wc.op_index = 5;
  EXPECT_FALSE(cache.find(0, "h_checkpoint", key, wc)) << "found by content within its own comparison";
  cache.end_comparison();
  const std::optional<TensorReport> reused = cache.find(0, "h_checkpoint", key, wc);
  ASSERT_TRUE(reused);
  EXPECT_EQ(reused->json(), compare_tensor(l.h, got, cls, Tolerances::defaults(), wc, true, &cond).json());
  Where wl = w;
  wl.layer = 1;  // another layer's field of the same contents too
  EXPECT_TRUE(cache.find(1, "h", key, wl));
  EXPECT_FALSE(cache.find(0, "h_checkpoint", FieldCache::Key{key.ref, key.got, key.cond, TolClass::exact}, wc))
      << "another class is compared afresh";

  // through compare_state: a checkpoint of h on both sides, after a comparison that passed h
  SequenceState ra = a.state, rb = a.state;
  rb.layers[0].h = got;
  FieldCache states;
  ASSERT_TRUE(compare_state(ra, rb, Tolerances::defaults(), base(), Strictness::classes, {}, &states).pass());
  for (SequenceState* x : {&ra, &rb}) {
    x->layers[0].h_checkpoint = x->layers[0].h;
    x->layers[0].condition.h_checkpoint = x->layers[0].condition.h;
  }
  const int64_t before = states.reused();
  const StateReport after = compare_state(ra, rb, Tolerances::defaults(), base(), Strictness::classes, {}, &states);
  ASSERT_TRUE(after.pass()) << after.text();
  EXPECT_EQ(states.reused() - before, after.tensors) << "the new checkpoint's report is h's";
  const StateReport fresh = compare_state(ra, rb, Tolerances::defaults(), base());
  ASSERT_EQ(after.margins.size(), fresh.margins.size());
  for (size_t i = 0; i < fresh.margins.size(); ++i) {
    EXPECT_EQ(after.margins[i].where.tensor, fresh.margins[i].where.tensor);
    EXPECT_EQ(after.margins[i].error_ratio, fresh.margins[i].error_ratio) << fresh.margins[i].where.tensor;
  }
}

}  // namespace
}  // namespace ssm::cmp
