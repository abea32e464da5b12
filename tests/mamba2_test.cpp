// reference/mamba2_*.cpp against an independent FP64 Mamba-2 token written here from STATE-MODEL
// section 3 with plain loops, plus the transitions' metamorphic properties on Mamba-2 and hybrid
// models, FP16 stores, dt limits and the Nemotron-H geometry.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "fixtures/generators.h"
#include "reference/branches.h"
#include "reference/reference_backend.h"
#include "tests/support/ref_harness.h"

namespace ssm::test {
namespace {

// ---------------------------------------------------------------------------------------------
// The independent token (STATE-MODEL section 3, Mamba-2 step; section 6 for the FP16 stores)
// ---------------------------------------------------------------------------------------------

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// A kernel's store of FP16 state: saturate clamps to +-65504 first and maps NaN to -65504;
// F16Store::inf rounds to nearest even with overflow to inf (NaN stays NaN).
uint16_t kernel_store(F16Store store, float f) {
  if (store == F16Store::inf) return float_to_half_rne(f);
  if (std::isnan(f)) return 0xfbffu;
  return float_to_half_rne(std::min(std::max(f, -65504.0f), 65504.0f));
}

// How often the dt branches were taken (per head and token), as reference/branches.h counts them.
struct DtTally {
  int64_t threshold = 0, dt_min = 0, dt_max = 0;
};

// One Mamba-2 layer's state as the oracle keeps it.
struct OracleLayer {
  std::vector<float> h;       // [nh, hp, ns], ns fastest: the stored values (FP16 ones widened)
  std::vector<uint16_t> h16;  // [nh, hp, ns] the FP16 bits, when f16
  bool f16 = false;
  std::vector<float> carry;   // F16Rows::carried: the FP32 state the rows of the current op carry
  std::vector<float> conv;    // [conv_dim, d_conv], column 0 oldest
  std::vector<float> last_f32;  // [nh, hp, ns] the FP32 values the last token computed (before any FP16 store)
};

// One token through one Mamba-2 layer, in FP64 with h rounded to FP32 where it is stored, then by
// the kernel's FP16 store when the layer's h is FP16; y reads the stored state (F16Rows::carried:
// the FP32 state the op's rows carry). Returns out [nh*hp].
std::vector<double> oracle_token(const LayerSpec& s, const LayerWeights& w, OracleLayer& st, const float* xin,
                                 const float* dt_raw, const float* z, bool first_row_of_op, DtTally* tally,
                                 bool clamp_dt = true) {
  const int C = s.conv_dim(), D = s.d_conv, di = s.d_inner();
  std::vector<double> xbc(size_t(C), 0.0);  // [x | B | C] after conv + silu
  for (int c = 0; c < C; ++c) {
    float* win = &st.conv[size_t(c) * size_t(D)];
    for (int j = 0; j + 1 < D; ++j) win[j] = win[j + 1];
    win[D - 1] = xin[c];
    double acc = s.conv_bias ? double(w.conv_bias[size_t(c)]) : 0.0;
    for (int j = 0; j < D; ++j) acc += double(w.conv_w[size_t(c) * size_t(D) + size_t(j)]) * double(win[j]);
    xbc[size_t(c)] = silu(acc);
  }
  const bool carried = st.f16 && s.numerics.f16_rows == F16Rows::carried;
  if (carried && first_row_of_op) st.carry = st.h;
  st.last_f32.assign(st.h.size(), 0.0f);
  std::vector<double> y(size_t(di), 0.0);
  const int per_group = s.nh / s.ng;
  for (int h = 0; h < s.nh; ++h) {
    const double x = double(dt_raw[h]) + double(w.dt_bias[size_t(h)]);
    double dt = x > 20.0 ? x : std::log1p(std::exp(x));
    if (tally) {
      tally->threshold += x > 20.0;
      tally->dt_min += dt < double(s.dt_min);
      tally->dt_max += dt > double(s.dt_max);
    }
    if (clamp_dt) dt = std::min(std::max(dt, double(s.dt_min)), double(s.dt_max));
    const double dA = std::max(std::exp(-std::exp(double(w.A_log[size_t(h)])) * dt), 0x1p-149);  // the contract's floor
    const int g = h / per_group;
    const double* B = &xbc[size_t(di + g * s.ns)];
    const double* Cg = &xbc[size_t(di + (s.ng + g) * s.ns)];
    for (int p = 0; p < s.hp; ++p) {
      const double xp = xbc[size_t(h * s.hp + p)];
      double acc = 0.0;
      for (int n = 0; n < s.ns; ++n) {
        const size_t e = (size_t(h) * size_t(s.hp) + size_t(p)) * size_t(s.ns) + size_t(n);
        const double prev = carried ? double(st.carry[e]) : double(st.h[e]);
        const float f = float(dA * prev + dt * xp * B[n]);
        st.last_f32[e] = f;
        double read = f;
        if (st.f16) {
          st.h16[e] = kernel_store(s.numerics.f16_store, f);
          st.h[e] = half_to_float(st.h16[e]);
          if (carried) st.carry[e] = f;
          else read = st.h[e];
        } else {
          st.h[e] = f;
        }
        acc += read * Cg[n];
      }
      y[size_t(h * s.hp + p)] = acc + double(w.D[size_t(h)]) * xp;
    }
  }
  const int gs = di / s.ng;  // channels per norm group
  std::vector<double> out(size_t(di), 0.0);
  for (int g = 0; g < s.ng; ++g) {
    double ss = 0.0;
    for (int j = g * gs; j < (g + 1) * gs; ++j) {
      const double u = s.norm_before_gate ? y[size_t(j)] : y[size_t(j)] * silu(z[j]);
      ss += u * u;
    }
    const double rms = std::sqrt(ss / gs + double(s.eps));
    for (int j = g * gs; j < (g + 1) * gs; ++j) {
      const double nw = double(w.norm_w[size_t(j)]);
      out[size_t(j)] = s.norm_before_gate ? y[size_t(j)] / rms * nw * silu(z[j])
                                          : y[size_t(j)] * silu(z[j]) / rms * nw;
    }
  }
  return out;
}

// The oracle of a whole model: its Mamba-2 layers only (GDN layers are other tests' business).
// Follows the h modes of STATE-MODEL section 6: prefill in FP32 (f16-pool narrows with the
// converter), the first decode or verify of f16 mode converts with the converter.
class Oracle {
 public:
  Oracle(const Model& m, HMode mode) : model_(m), mode_(mode) {
    for (const LayerSpec& s : m.spec.layers) {
      OracleLayer L;
      if (s.kind == LayerKind::mamba2) {
        L.h.assign(size_t(s.h_elems()), 0.0f);
        L.h16.assign(size_t(s.h_elems()), 0);
        L.f16 = mode == HMode::f16_pool;
        L.conv.assign(size_t(s.conv_elems()), 0.0f);
      }
      layers_.push_back(std::move(L));
    }
    tally.resize(layers_.size());
  }
  bool is_mamba(size_t l) const { return model_.spec.layers[l].kind == LayerKind::mamba2; }
  OracleLayer& layer(size_t l) { return layers_[l]; }

  // Per layer [rows][out_dim] (empty for GDN layers).
  std::vector<std::vector<double>> prefill(const StepInputs& in) {
    for (size_t l = 0; l < layers_.size(); ++l) layers_[l].f16 = false;  // widened exactly (h holds the values)
    auto out = run(in, false);
    if (mode_ == HMode::f16_pool)
      for (size_t l = 0; l < layers_.size(); ++l)
        if (is_mamba(l)) narrow(layers_[l]);
    return out;
  }
  std::vector<std::vector<double>> decode(const StepInputs& in) { return verify(in); }
  // Any number of rows as one op; after row t the state is kept as intermediate t.
  std::vector<std::vector<double>> verify(const StepInputs& in) {
    if (mode_ == HMode::f16)
      for (size_t l = 0; l < layers_.size(); ++l)
        if (is_mamba(l) && !layers_[l].f16) narrow(layers_[l]);
    return run(in, true);
  }
  // commit(n, k) with n < k, and rollback(n >= 1): live <- intermediate n-1.
  void restore(int n) { layers_ = intermediates_[size_t(n - 1)]; }
  const OracleLayer& intermediate(int t, size_t l) const { return intermediates_[size_t(t)][l]; }
  // Take a state the reference exported (for one-op checks from the reference's own state).
  void sync(const SequenceState& st) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      if (!is_mamba(l)) continue;
      const LayerState& x = st.layers[l];
      OracleLayer& L = layers_[l];
      L.f16 = x.h.dtype() == DType::f16;
      for (int64_t i = 0; i < x.h.size(); ++i) {
        L.h[size_t(i)] = x.h.get(i);
        L.h16[size_t(i)] = L.f16 ? x.h.f16()[i] : 0;
      }
      L.conv.assign(x.conv.f32(), x.conv.f32() + x.conv.size());
    }
  }
  std::vector<DtTally> tally;  // per layer
  bool clamp_dt = true;  // false: the dt limits ignored (to show a test would see them missing)

 private:
  static void narrow(OracleLayer& L) {  // the converter: round to nearest even, no saturation
    for (size_t i = 0; i < L.h.size(); ++i) {
      L.h16[i] = float_to_half_rne(L.h[i]);
      L.h[i] = half_to_float(L.h16[i]);
    }
    L.f16 = true;
  }
  std::vector<std::vector<double>> run(const StepInputs& in, bool keep_intermediates) {
    std::vector<std::vector<double>> out(layers_.size());
    intermediates_.clear();
    for (int t = 0; t < in.rows; ++t) {
      for (size_t l = 0; l < layers_.size(); ++l) {
        if (!is_mamba(l)) continue;
        const LayerSpec& s = model_.spec.layers[l];
        const LayerRows& r = in.layers[l];
        const std::vector<double> o =
            oracle_token(s, model_.weights[l], layers_[l], r.conv_in.data() + size_t(t) * size_t(s.conv_dim()),
                         r.dt_in.data() + size_t(t) * size_t(s.nh), r.gate_in.data() + size_t(t) * size_t(s.out_dim()),
                         t == 0, &tally[l], clamp_dt);
        out[l].insert(out[l].end(), o.begin(), o.end());
      }
      if (keep_intermediates) intermediates_.push_back(layers_);
    }
    return out;
  }
  const Model& model_;
  HMode mode_;
  std::vector<OracleLayer> layers_;
  std::vector<std::vector<OracleLayer>> intermediates_;
};

// ---------------------------------------------------------------------------------------------
// Bounds
// ---------------------------------------------------------------------------------------------

// Oracle vs reference, outputs and FP32 h. Both compute in FP64 and round h to FP32 at the same
// points, so they differ by (a) FP64 summation order (Eigen's gemv vs these loops, ~1e-16
// relative), (b) the final FP32 rounding of the output (2^-24 ~ 6e-8 relative) and (c) rarely an
// FP32 h element one ULP apart where an FP64 difference of (a) straddles a rounding boundary,
// carried forward by dA <= 1. 1e-6 is 16 FP32 ULPs: above every one of these, below any real
// difference of the math (a missed clamp, a wrong group, a misplaced rounding). Elements that
// cancel are judged at their scale: an output against the RMS of its norm group, an h element
// against the largest |h| of its head.
constexpr double kRel = 1e-6;

// First output beyond the bound of layer l over `rows` rows; "" when all agree. NaN must match NaN.
std::string output_mismatch(const LayerSpec& s, const std::vector<float>& ref, const std::vector<double>& mine,
                            int rows) {
  if (ref.size() != mine.size()) return "output sizes " + std::to_string(ref.size()) + " vs " + std::to_string(mine.size());
  const int di = s.out_dim(), gs = di / s.ng;
  int64_t bad = 0;
  std::string first;
  for (int t = 0; t < rows; ++t)
    for (int g = 0; g < s.ng; ++g) {
      double ss = 0.0;
      for (int j = g * gs; j < (g + 1) * gs; ++j) ss += mine[size_t(t * di + j)] * mine[size_t(t * di + j)];
      const double scale = std::sqrt(ss / gs);
      for (int j = g * gs; j < (g + 1) * gs; ++j) {
        const size_t i = size_t(t * di + j);
        const double a = ref[i], b = mine[i];
        const bool ok = (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= kRel * std::max(std::fabs(b), scale);
        if (!ok && bad++ == 0)
          first = "row " + std::to_string(t) + " out[" + std::to_string(j) + "]: reference " + std::to_string(a) +
                  " oracle " + std::to_string(b) + " (group rms " + std::to_string(scale) + ")";
      }
    }
  return bad ? first + "; " + std::to_string(bad) + " of " + std::to_string(ref.size()) + " beyond" : "";
}

// h: FP32 within kRel at the head's scale; FP16 bit for bit (the store of the same FP32 value).
std::string h_mismatch(const LayerSpec& s, const Tensor& ref, const OracleLayer& mine) {
  if (ref.shape() != s.h_shape()) return "h shape " + ref.shape_string();
  if ((ref.dtype() == DType::f16) != mine.f16) return std::string("h dtype ") + to_string(ref.dtype());
  const int64_t head = int64_t(s.hp) * s.ns;
  int64_t bad = 0;
  std::string first;
  for (int h = 0; h < s.nh; ++h) {
    double scale = 0.0;
    for (int64_t i = h * head; i < (h + 1) * head; ++i) scale = std::max(scale, std::fabs(double(mine.h[size_t(i)])));
    for (int64_t i = h * head; i < (h + 1) * head; ++i) {
      const bool ok = mine.f16 ? ref.f16()[i] == mine.h16[size_t(i)]
                               : std::fabs(double(ref.get(i)) - double(mine.h[size_t(i)])) <=
                                     kRel * std::max(std::fabs(double(mine.h[size_t(i)])), scale);
      if (!ok && bad++ == 0)
        first = "h[" + std::to_string(i) + "] (head " + std::to_string(h) + "): reference " +
                std::to_string(ref.get(i)) + " oracle " + std::to_string(mine.h[size_t(i)]);
    }
  }
  return bad ? first + "; " + std::to_string(bad) + " of " + std::to_string(ref.size()) + " beyond" : "";
}

// conv windows are copies of inputs: bit for bit.
std::string conv_mismatch(const Tensor& ref, const OracleLayer& mine) {
  if (size_t(ref.size()) != mine.conv.size()) return "conv size";
  return std::memcmp(ref.f32(), mine.conv.data(), mine.conv.size() * 4) == 0 ? "" : "conv windows differ";
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

// A backend on a model with its generator; the case string names preset, pool and generator.
struct Case {
  ModelSpec spec;
  GenConfig gen;
  PoolConfig pool;
  Model model;
  std::unique_ptr<ref::ReferenceBackend> backend = std::make_unique<ref::ReferenceBackend>();

  Case(ModelSpec s, HMode mode, const GenConfig& g, int slots = 3, int capacity = 4) : spec(std::move(s)), gen(g) {
    pool.h_mode = mode;
    pool.max_slots = slots;
    pool.conv_capacity = capacity;
    pool.h_capacity.assign(size_t(slots), capacity);
    model = make_model(spec, gen);
    backend->create_pool(model, pool);
  }
  Case(const std::string& preset, HMode mode, const GenConfig& g, int slots = 3, int capacity = 4)
      : Case(make_preset(preset), mode, g, slots, capacity) {}
  StepInputs inputs(int step, int rows, int seq = 0) const { return make_inputs(spec, gen, step, seq, 0, rows); }
  std::string name() const { return "mamba2(" + spec.name + ") " + pool.name() + " " + gen.name(); }
};

GenConfig gen_of(uint64_t seed, double decay, bool extreme, double value_scale = 1.0) {
  GenConfig g;
  g.seed = seed;
  g.decay = decay;
  g.extreme_gates = extreme;
  g.value_scale = value_scale;
  return g;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Row t of one layer's [rows][width] outputs.
std::vector<float> row(const std::vector<float>& v, int width, int t) {
  return std::vector<float>(v.begin() + long(t * width), v.begin() + long((t + 1) * width));
}

// Every finite, and not all zero (nothing passes vacuously).
void expect_finite_nonzero(const StepOutputs& o, const std::string& what) {
  for (size_t l = 0; l < o.layers.size(); ++l) {
    double sum = 0.0;
    for (float v : o.layers[l]) {
      ASSERT_TRUE(std::isfinite(v)) << what << " layer " << l;
      sum += std::fabs(v);
    }
    EXPECT_GT(sum, 0.0) << what << " layer " << l;
  }
}

// ---------------------------------------------------------------------------------------------
// 1. Oracle vs reference: every Mamba-2 preset and hybrid-odd's Mamba-2 layers, every h mode
// ---------------------------------------------------------------------------------------------

using OracleParam = std::tuple<std::string, HMode, uint64_t, double, bool>;  // preset, mode, seed, decay, extreme

class Mamba2Oracle : public ::testing::TestWithParam<OracleParam> {
 protected:
  // Compares every Mamba-2 layer's outputs, h and conv against the oracle.
  void check(Case& c, Oracle& o, const StepOutputs& ref, const std::vector<std::vector<double>>& mine,
             const std::string& what) {
    const SequenceState st = c.backend->export_state(0);
    for (size_t l = 0; l < c.spec.layers.size(); ++l) {
      if (!o.is_mamba(l)) continue;
      const LayerSpec& s = c.spec.layers[l];
      EXPECT_EQ(output_mismatch(s, ref.layers[l], mine[l], ref.rows), "") << what << " layer " << l;
      EXPECT_EQ(h_mismatch(s, st.layers[l].h, o.layer(l)), "") << what << " layer " << l;
      EXPECT_EQ(conv_mismatch(st.layers[l].conv, o.layer(l)), "") << what << " layer " << l;
    }
  }
};

// alloc; prefill 5; decode x3; verify 3 (outputs, intermediates); commit 2 3; decode. In f32 mode the
// oracle runs on its own from zero (h within kRel); in the FP16 modes it restarts from the
// reference's exported state before each op, so each stored FP16 element must be exactly the
// kernel store (or, after prefill, the converter) of the FP32 value computed from the same state.
TEST_P(Mamba2Oracle, TransitionsMatchIndependentToken) {
  const auto& [preset, mode, seed, decay, extreme] = GetParam();
  Case c(preset, mode, gen_of(seed, decay, extreme));
  SCOPED_TRACE(c.name() + " (seed=" + std::to_string(seed) + ")");
  Oracle o(c.model, mode);
  const bool resync = mode != HMode::f32;
  ASSERT_EQ(c.backend->alloc(0), 0);

  const StepInputs pre = c.inputs(1, 5);
  check(c, o, c.backend->prefill(0, pre), o.prefill(pre), "prefill 5");
  for (int step = 2; step < 5; ++step) {
    if (resync) o.sync(c.backend->export_state(0));
    const StepInputs in = c.inputs(step, 1);
    check(c, o, c.backend->decode({0}, {in})[0], o.decode(in), "decode step " + std::to_string(step));
  }
  if (resync) o.sync(c.backend->export_state(0));
  const StepInputs vin = c.inputs(5, 3);
  check(c, o, c.backend->verify({0}, 3, VerifyArm::exact, {vin})[0], o.verify(vin), "verify 3");
  const SequenceState v = c.backend->export_state(0);
  for (size_t l = 0; l < c.spec.layers.size(); ++l) {
    if (!o.is_mamba(l)) continue;
    ASSERT_EQ(v.layers[l].h_intermediates.size(), 2u) << "layer " << l;
    for (int t = 0; t < 2; ++t)
      EXPECT_EQ(h_mismatch(c.spec.layers[l], v.layers[l].h_intermediates[size_t(t)], o.intermediate(t, l)), "")
          << "verify 3 intermediate " << t << " layer " << l;
  }
  c.backend->commit(0, 2, 3);
  o.restore(2);
  for (size_t l = 0; l < c.spec.layers.size(); ++l) {
    if (!o.is_mamba(l)) continue;
    const LayerSpec& s = c.spec.layers[l];
    const SequenceState st = c.backend->export_state(0);
    EXPECT_EQ(h_mismatch(s, st.layers[l].h, o.layer(l)), "") << "after commit 2 3, layer " << l;
    EXPECT_EQ(conv_mismatch(st.layers[l].conv, o.layer(l)), "") << "after commit 2 3, layer " << l;
  }
  if (resync) o.sync(c.backend->export_state(0));
  const StepInputs last = c.inputs(6, 1);
  const StepOutputs out = c.backend->decode({0}, {last})[0];
  check(c, o, out, o.decode(last), "decode after commit");
  expect_finite_nonzero(out, "decode after commit");
}

std::string oracle_name(const ::testing::TestParamInfo<OracleParam>& info) {
  const auto& [preset, mode, seed, decay, extreme] = info.param;
  std::string s = preset + "_" + to_string(mode) + "_seed" + std::to_string(seed) + "_decay" +
                  std::to_string(int(decay * 10)) + (extreme ? "_extreme" : "");
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Grid, Mamba2Oracle,
                         ::testing::Combine(::testing::Values("mamba-tiny", "mamba-odd-a", "mamba-odd-b", "mamba-odd-c",
                                                              "hybrid-odd"),
                                            ::testing::Values(HMode::f32, HMode::f16, HMode::f16_pool),
                                            ::testing::Values(uint64_t(5), uint64_t(1234)),
                                            ::testing::Values(0.0, 0.5, 1.0), ::testing::Bool()),
                         oracle_name);

// ---------------------------------------------------------------------------------------------
// 2. Metamorphic properties (bitwise)
// ---------------------------------------------------------------------------------------------

using MetaParam = std::tuple<std::string, HMode, uint64_t, bool>;  // preset, mode, seed, extreme

std::string meta_name(const ::testing::TestParamInfo<MetaParam>& info) {
  const auto& [preset, mode, seed, extreme] = info.param;
  std::string s = preset + "_" + to_string(mode) + "_seed" + std::to_string(seed) + (extreme ? "_extreme" : "");
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

class Mamba2Transitions : public ::testing::TestWithParam<MetaParam> {
 protected:
  std::unique_ptr<Case> make() const {
    const auto& [preset, mode, seed, extreme] = GetParam();
    return std::make_unique<Case>(preset, mode, gen_of(seed, 0.5, extreme));
  }
  static void start(Case& c) {  // alloc; prefill 5
    ASSERT_EQ(c.backend->alloc(0), 0);
    c.backend->prefill(0, c.inputs(1, 5));
  }
};

// verify(K) then commit(n, K) equals n decodes from the same start: the first n output rows, live h
// and conv; intermediate t equals the state after t+1 decodes.
TEST_P(Mamba2Transitions, VerifyThenCommitEqualsDecodes) {
  for (int K = 1; K <= 4; ++K)
    for (int n = 1; n <= K; ++n) {
      auto a = make(), b = make();
      SCOPED_TRACE(a->name() + " K=" + std::to_string(K) + " n=" + std::to_string(n));
      start(*a);
      start(*b);
      const StepInputs rows = a->inputs(2, K);
      const StepOutputs vout = a->backend->verify({0}, K, VerifyArm::exact, {rows})[0];
      const SequenceState va = a->backend->export_state(0);
      a->backend->commit(0, n, K);
      for (int t = 0; t < std::max(n, K - 1); ++t) {
        const StepOutputs d = b->backend->decode({0}, {rows.slice(b->spec, t, 1)})[0];
        const SequenceState sb = b->backend->export_state(0);
        for (size_t l = 0; l < b->spec.layers.size(); ++l) {
          const int w = b->spec.layers[l].out_dim();
          EXPECT_TRUE(bits_equal(d.layers[l], row(vout.layers[l], w, t))) << "output row " << t << " layer " << l;
          if (t + 1 < K) {
            EXPECT_EQ(tensor_diff(va.layers[l].h_intermediates[size_t(t)], sb.layers[l].h, "h_intermediate"), "")
                << "t=" << t << " layer " << l;
            EXPECT_EQ(tensor_diff(va.layers[l].conv_intermediates[size_t(t)], sb.layers[l].conv, "conv_intermediate"), "")
                << "t=" << t << " layer " << l;
          }
        }
        if (t + 1 == n) {
          EXPECT_EQ(state_diff(a->backend->export_state(0), sb, true), "") << "after commit";
        }
      }
    }
}

// rollback(n) after verify(4) equals n decodes; rollback_and_checkpoint(n) also makes that the checkpoint.
TEST_P(Mamba2Transitions, RollbackAfterVerifyEqualsDecodes) {
  const int K = 4;
  for (int n = 1; n < K; ++n)
    for (bool and_checkpoint : {false, true}) {
      auto a = make(), b = make();
      SCOPED_TRACE(a->name() + " n=" + std::to_string(n) + (and_checkpoint ? " and_checkpoint" : ""));
      start(*a);
      start(*b);
      const StepInputs rows = a->inputs(2, K);
      a->backend->verify({0}, K, VerifyArm::exact, {rows});
      a->backend->rollback(0, n, and_checkpoint);
      for (int t = 0; t < n; ++t) b->backend->decode({0}, {rows.slice(b->spec, t, 1)});
      const SequenceState sa = a->backend->export_state(0), sb = b->backend->export_state(0);
      EXPECT_EQ(state_diff(sa, sb, true), "");
      if (and_checkpoint)
        for (size_t l = 0; l < sa.layers.size(); ++l) {
          ASSERT_TRUE(sa.layers[l].h_checkpoint && sa.layers[l].conv_checkpoint) << "layer " << l;
          EXPECT_EQ(tensor_diff(*sa.layers[l].h_checkpoint, sb.layers[l].h, "h_checkpoint"), "") << "layer " << l;
          EXPECT_EQ(tensor_diff(*sa.layers[l].conv_checkpoint, sb.layers[l].conv, "conv_checkpoint"), "") << "layer " << l;
        }
      // and the sequence continues as if the rejected rows never ran
      const StepInputs next = a->inputs(3, 1);
      EXPECT_EQ(a->backend->decode({0}, {next})[0].layers, b->backend->decode({0}, {next})[0].layers);
      EXPECT_EQ(state_diff(a->backend->export_state(0), b->backend->export_state(0), true), "");
    }
}

// Batched decode of three sequences with padding rows equals one-by-one decodes; the claimed slot
// that is not in the batch never changes.
TEST_P(Mamba2Transitions, BatchedDecodeWithPaddingEqualsOneByOne) {
  auto a = make(), b = make();
  SCOPED_TRACE(a->name());
  for (Case* c : {a.get(), b.get()})
    for (int s = 0; s < 3; ++s) {
      ASSERT_EQ(c->backend->alloc(0), s);
      c->backend->prefill(s, c->inputs(1, 2 + s, s));
    }
  const SequenceState untouched = a->backend->export_state(1);
  for (int step = 2; step < 5; ++step) {
    const StepInputs i0 = a->inputs(step, 1, 0), i2 = a->inputs(step, 1, 2), pad = a->inputs(step, 1, 99);
    const auto batched = a->backend->decode({2, kPadRow, 0, kPadRow}, {i2, pad, i0, pad});
    ASSERT_EQ(batched.size(), 4u);
    EXPECT_EQ(batched[0].layers, b->backend->decode({2}, {i2})[0].layers) << "step " << step;
    EXPECT_EQ(batched[2].layers, b->backend->decode({0}, {i0})[0].layers) << "step " << step;
    EXPECT_EQ(state_diff(a->backend->export_state(1), untouched, false), "") << "step " << step;
  }
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(state_diff(a->backend->export_state(s), b->backend->export_state(s), false), "") << "slot " << s;
}

// checkpoint, then decodes and a verify, then rollback(0): live h (with its dtype and h_is_f16) and
// conv are the checkpoint's again, and the next decode is what it was from the checkpoint. The
// checkpoint follows a decode so that in f16 mode it holds FP16 h (the contract refuses to restore
// an FP32 checkpoint over FP16 live h: dtype_mismatch).
TEST_P(Mamba2Transitions, CheckpointThenRollbackZeroRestores) {
  auto a = make(), b = make();
  SCOPED_TRACE(a->name());
  for (Case* c : {a.get(), b.get()}) {
    start(*c);
    c->backend->decode({0}, {c->inputs(2, 1)});
  }
  a->backend->checkpoint(0, false);
  const SequenceState at_checkpoint = a->backend->export_state(0);
  a->backend->decode({0}, {a->inputs(3, 1)});
  a->backend->decode({0}, {a->inputs(4, 1)});
  a->backend->verify({0}, 3, VerifyArm::exact, {a->inputs(5, 3)});
  ASSERT_NE(state_diff(a->backend->export_state(0), at_checkpoint, true), "") << "the ops changed nothing";
  a->backend->rollback(0, 0, false);
  EXPECT_EQ(state_diff(a->backend->export_state(0), at_checkpoint, true), "");
  const StepInputs next = a->inputs(6, 1);
  EXPECT_EQ(a->backend->decode({0}, {next})[0].layers, b->backend->decode({0}, {next})[0].layers);
  EXPECT_EQ(state_diff(a->backend->export_state(0), b->backend->export_state(0), true), "");
}

INSTANTIATE_TEST_SUITE_P(Grid, Mamba2Transitions,
                         ::testing::Combine(::testing::Values("mamba-tiny", "mamba-odd-a", "mamba-odd-b", "mamba-odd-c",
                                                              "hybrid-odd"),
                                            ::testing::Values(HMode::f32, HMode::f16, HMode::f16_pool),
                                            ::testing::Values(uint64_t(11), uint64_t(2024)), ::testing::Bool()),
                         meta_name);

// prefill(T) equals T single-row decodes in f32 mode (FP16 modes differ by design: prefill rounds
// once at the end), from a fresh slot and after a first prefill.
class Mamba2Prefill : public ::testing::TestWithParam<MetaParam> {};

TEST_P(Mamba2Prefill, PrefillEqualsSingleRowDecodes) {
  const auto& [preset, mode, seed, extreme] = GetParam();
  for (int first : {0, 3})
    for (int T : {1, 2, 6}) {
      Case a(preset, mode, gen_of(seed, 0.5, extreme)), b(preset, mode, gen_of(seed, 0.5, extreme));
      SCOPED_TRACE(a.name() + " first=" + std::to_string(first) + " T=" + std::to_string(T));
      for (Case* c : {&a, &b}) {
        ASSERT_EQ(c->backend->alloc(0), 0);
        if (first) c->backend->prefill(0, c->inputs(1, first));
      }
      const StepInputs rows = a.inputs(2, T);
      const StepOutputs p = a.backend->prefill(0, rows);
      for (int t = 0; t < T; ++t) {
        const StepOutputs d = b.backend->decode({0}, {rows.slice(b.spec, t, 1)})[0];
        for (size_t l = 0; l < b.spec.layers.size(); ++l)
          EXPECT_TRUE(bits_equal(d.layers[l], row(p.layers[l], b.spec.layers[l].out_dim(), t)))
              << "row " << t << " layer " << l;
      }
      EXPECT_EQ(state_diff(a.backend->export_state(0), b.backend->export_state(0), true), "");
    }
}

INSTANTIATE_TEST_SUITE_P(Grid, Mamba2Prefill,
                         ::testing::Combine(::testing::Values("mamba-tiny", "mamba-odd-a", "mamba-odd-b", "hybrid-odd"),
                                            ::testing::Values(HMode::f32), ::testing::Values(uint64_t(11), uint64_t(2024)),
                                            ::testing::Bool()),
                         meta_name);

// ---------------------------------------------------------------------------------------------
// 3. FP16 stores
// ---------------------------------------------------------------------------------------------

// A spec with every layer's FP16 conventions set.
ModelSpec with_f16(const std::string& preset, F16Store store, F16Rows rows) {
  ModelSpec spec = make_preset(preset);
  for (LayerSpec& l : spec.layers) {
    l.numerics.f16_store = store;
    l.numerics.f16_rows = rows;
  }
  return spec;
}

// Decodes from a fresh f16-pool slot with x scaled by 2e5 and little forgetting, until a store
// passes the FP16 range (h grows by up to ~2e4 a token). Up to that token both conventions hold the
// same state; on it, the saturating store gives +-65504 exactly where the FP32 value is beyond it,
// the inf store gives +-inf where it rounds past 65504 (>= 65520), every other element is the same
// in both, and each convention's h (and outputs, NaN where an inf was read back) is the oracle's
// store of its FP32 value computed from the same state, bit for bit.
TEST(Mamba2F16, OverflowSaturatesOrGoesToInf) {
  for (const std::string preset : {"mamba-tiny", "mamba-odd-b"}) {
    const uint64_t seed = 7;
    const GenConfig gen = gen_of(seed, 0.1, false, 2e5);
    Case sat(with_f16(preset, F16Store::saturate, F16Rows::stored), HMode::f16_pool, gen);
    Case inf(with_f16(preset, F16Store::inf, F16Rows::stored), HMode::f16_pool, gen);
    SCOPED_TRACE(sat.name() + " vs f16_store=inf (seed=" + std::to_string(seed) + ")");
    Oracle os(sat.model, HMode::f16_pool), oi(inf.model, HMode::f16_pool);
    sat.backend->alloc(0);
    inf.backend->alloc(0);
    int beyond = 0, to_inf = 0, step = 0;
    for (; step < 12 && to_inf == 0; ++step) {
      ASSERT_EQ(state_diff(sat.backend->export_state(0), inf.backend->export_state(0), true), "")
          << "the conventions diverged before any store overflowed, step " << step;
      os.sync(sat.backend->export_state(0));
      oi.sync(inf.backend->export_state(0));
      const StepInputs in = sat.inputs(step, 1);
      const StepOutputs out_s = sat.backend->decode({0}, {in})[0], out_i = inf.backend->decode({0}, {in})[0];
      const auto mine_s = os.decode(in), mine_i = oi.decode(in);
      const SequenceState st_s = sat.backend->export_state(0), st_i = inf.backend->export_state(0);
      for (size_t l = 0; l < sat.spec.layers.size(); ++l) {
        const LayerSpec& s = sat.spec.layers[l];
        ASSERT_EQ(st_s.layers[l].h.dtype(), DType::f16);
        EXPECT_EQ(h_mismatch(s, st_s.layers[l].h, os.layer(l)), "") << "saturate, step " << step << " layer " << l;
        EXPECT_EQ(h_mismatch(s, st_i.layers[l].h, oi.layer(l)), "") << "inf, step " << step << " layer " << l;
        EXPECT_EQ(output_mismatch(s, out_s.layers[l], mine_s[l], 1), "") << "saturate, step " << step << " layer " << l;
        EXPECT_EQ(output_mismatch(s, out_i.layers[l], mine_i[l], 1), "") << "inf, step " << step << " layer " << l;
        for (float v : out_s.layers[l]) ASSERT_TRUE(std::isfinite(v)) << "saturated state gave a non-finite output";
        const std::vector<float>& f32 = os.layer(l).last_f32;
        for (size_t i = 0; i < f32.size(); ++i) {
          const float f = f32[i];
          const uint16_t hs = st_s.layers[l].h.f16()[i], hi = st_i.layers[l].h.f16()[i];
          const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
          if (std::fabs(f) > 65504.0f) {
            ++beyond;
            EXPECT_EQ(hs, sign | 0x7bff) << "step " << step << " layer " << l << " h[" << i << "] = " << f;
          } else {
            EXPECT_EQ(hs, float_to_half_rne(f)) << "step " << step << " layer " << l << " h[" << i << "] = " << f;
          }
          if (std::fabs(f) >= 65520.0f) {
            ++to_inf;
            EXPECT_EQ(hi, sign | 0x7c00) << "step " << step << " layer " << l << " h[" << i << "] = " << f;
          } else {
            EXPECT_EQ(hi, hs) << "step " << step << " layer " << l << " h[" << i << "] = " << f;
          }
        }
      }
    }
    EXPECT_GT(to_inf, 0) << preset << ": no store overflowed in " << step << " decodes; raise value_scale";
    EXPECT_GE(beyond, to_inf);
  }
}

// F16Rows::carried (vLLM's and fla's kernels): a one-row op starts from the stored state in both
// conventions, so decodes store the same FP16 h bit for bit (here through an overflow to inf);
// on the decode that first overflows, the contract's output reads inf back (NaN) while the carried
// output reads the FP32 state and stays finite. Over a verify the carried rows stay finite where
// the stored convention reads rounded (overflowed) state, and the carried rows and intermediates
// match the oracle's carried rows (outputs within kRel, intermediates bit for bit).
TEST(Mamba2F16, CarriedRowsReadTheFp32State) {
  const uint64_t seed = 7;
  for (const std::string preset : {"mamba-tiny", "mamba-odd-a"}) {
    SCOPED_TRACE(preset + " (seed=" + std::to_string(seed) + ")");
    {
      const GenConfig gen = gen_of(seed, 0.1, false, 2e5);
      Case stored(with_f16(preset, F16Store::inf, F16Rows::stored), HMode::f16_pool, gen);
      Case carried(with_f16(preset, F16Store::inf, F16Rows::carried), HMode::f16_pool, gen);
      stored.backend->alloc(0);
      carried.backend->alloc(0);
      bool overflowed = false;
      int step = 0;
      for (; step < 12 && !overflowed; ++step) {
        const StepInputs in = stored.inputs(step, 1);
        const StepOutputs os = stored.backend->decode({0}, {in})[0], oc = carried.backend->decode({0}, {in})[0];
        const SequenceState ss = stored.backend->export_state(0);
        EXPECT_EQ(state_diff(ss, carried.backend->export_state(0), true), "") << "decode " << step;
        for (const LayerState& L : ss.layers)
          for (int64_t i = 0; i < L.h.size(); ++i) overflowed |= !half_is_finite(L.h.f16()[i]);
        if (!overflowed) continue;
        int nan_stored = 0;
        for (size_t l = 0; l < os.layers.size(); ++l)
          for (size_t i = 0; i < os.layers[l].size(); ++i) {
            nan_stored += std::isnan(os.layers[l][i]);
            EXPECT_TRUE(std::isfinite(oc.layers[l][i])) << "carried output, decode " << step << " layer " << l;
          }
        EXPECT_GT(nan_stored, 0) << "the stored convention read the overflowed state back as finite";
      }
      EXPECT_TRUE(overflowed) << "no store overflowed in " << step << " decodes: raise value_scale";
    }
    // verify 3 from a fresh slot past the FP16 range, inf store
    std::vector<StepOutputs> outs;
    for (F16Rows rows : {F16Rows::stored, F16Rows::carried}) {
      Case c(with_f16(preset, F16Store::inf, rows), HMode::f16_pool, gen_of(seed, 0.1, false, 2e5));
      SCOPED_TRACE(c.name() + " rows=" + to_string(rows));
      Oracle o(c.model, HMode::f16_pool);
      c.backend->alloc(0);
      const StepInputs in = c.inputs(0, 3);
      outs.push_back(c.backend->verify({0}, 3, VerifyArm::exact, {in})[0]);
      const auto mine = o.verify(in);
      const SequenceState st = c.backend->export_state(0);
      for (size_t l = 0; l < c.spec.layers.size(); ++l) {
        EXPECT_EQ(output_mismatch(c.spec.layers[l], outs.back().layers[l], mine[l], 3), "") << "layer " << l;
        EXPECT_EQ(h_mismatch(c.spec.layers[l], st.layers[l].h, o.layer(l)), "") << "layer " << l;
      }
      for (size_t l = 0; l < c.spec.layers.size(); ++l)
        for (int t = 0; t < 2; ++t)  // the intermediates are the rows' stores (carried: of the FP32 rows)
          EXPECT_EQ(h_mismatch(c.spec.layers[l], st.layers[l].h_intermediates[size_t(t)], o.intermediate(t, l)), "")
              << "layer " << l << " intermediate " << t;
    }
    int nan_stored = 0;
    for (size_t l = 0; l < outs[0].layers.size(); ++l)
      for (size_t i = 0; i < outs[0].layers[l].size(); ++i) {
        nan_stored += std::isnan(outs[0].layers[l][i]);
        EXPECT_TRUE(std::isfinite(outs[1].layers[l][i])) << "carried output, layer " << l << " element " << i;
      }
    EXPECT_GT(nan_stored, 0) << "the stored convention read no overflowed state: raise value_scale";
  }
}


// ---------------------------------------------------------------------------------------------
// 4. dt limits
// ---------------------------------------------------------------------------------------------

// mamba-odd-a layer 1 clamps dt to [0.001, 0.1]: with extreme gates the softplus threshold and
// both limits are reached, the reference counts each branch exactly as often as the oracle takes
// it (per head and token; no GDN branch is counted), the clamped oracle agrees with the reference
// and an oracle without the limits does not (so the agreement is not vacuous).
TEST(Mamba2DtLimits, BranchesReachedAndOracleAgrees) {
  for (uint64_t seed : {uint64_t(3), uint64_t(17)}) {
    Case c("mamba-odd-a", HMode::f32, gen_of(seed, 0.5, true));
    SCOPED_TRACE(c.name() + " (seed=" + std::to_string(seed) + ")");
    ASSERT_EQ(c.spec.layers[1].dt_min, 0.001f);
    ASSERT_EQ(c.spec.layers[1].dt_max, 0.1f);
    Oracle o(c.model, HMode::f32), unclamped(c.model, HMode::f32);
    unclamped.clamp_dt = false;
    c.backend->alloc(0);
    ref::take_branch_counts();
    const StepInputs pre = c.inputs(1, 4), dec = c.inputs(2, 1), ver = c.inputs(3, 3);
    std::vector<StepOutputs> ref_out = {c.backend->prefill(0, pre), c.backend->decode({0}, {dec})[0],
                                        c.backend->verify({0}, 3, VerifyArm::exact, {ver})[0]};
    const auto counts = ref::take_branch_counts();
    std::vector<std::vector<std::vector<double>>> mine = {o.prefill(pre), o.decode(dec), o.verify(ver)};
    unclamped.prefill(pre);
    unclamped.decode(dec);
    unclamped.verify(ver);

    DtTally total;
    for (const DtTally& t : o.tally) {
      total.threshold += t.threshold;
      total.dt_min += t.dt_min;
      total.dt_max += t.dt_max;
    }
    EXPECT_EQ(counts[size_t(ref::Branch::mamba2_softplus_threshold)], total.threshold);
    EXPECT_EQ(counts[size_t(ref::Branch::mamba2_dt_min)], total.dt_min);
    EXPECT_EQ(counts[size_t(ref::Branch::mamba2_dt_max)], total.dt_max);
    for (ref::Branch b : {ref::Branch::softplus_threshold, ref::Branch::alog_clamp, ref::Branch::g_clamp_low,
                          ref::Branch::g_clamp_high})
      EXPECT_EQ(counts[size_t(b)], 0) << ref::branch_name(b) << " counted on a Mamba-2 model";
    EXPECT_GT(o.tally[1].threshold, 0) << "layer 1 never passed the softplus threshold";
    EXPECT_GT(o.tally[1].dt_min, 0) << "layer 1 never clamped dt up to dt_min";
    EXPECT_GT(o.tally[1].dt_max, 0) << "layer 1 never clamped dt down to dt_max";
    EXPECT_EQ(o.tally[0].dt_min + o.tally[0].dt_max, 0) << "layer 0 has no limits";

    const SequenceState st = c.backend->export_state(0);
    for (size_t l = 0; l < 2; ++l) {
      const LayerSpec& s = c.spec.layers[l];
      for (size_t op = 0; op < ref_out.size(); ++op)
        EXPECT_EQ(output_mismatch(s, ref_out[op].layers[l], mine[op][l], ref_out[op].rows), "")
            << "op " << op << " layer " << l;
      EXPECT_EQ(h_mismatch(s, st.layers[l].h, o.layer(l)), "") << "layer " << l;
    }
    EXPECT_NE(h_mismatch(c.spec.layers[1], st.layers[1].h, unclamped.layer(1)), "")
        << "layer 1's h does not depend on its dt limits";
  }
}

// ---------------------------------------------------------------------------------------------
// 5. The hybrid preset
// ---------------------------------------------------------------------------------------------

// hybrid-odd next to a model made of its GDN layers alone (same specs, same weights, the same
// inputs cut from hybrid's), driven through the same script of every op on two sequences with
// padding rows: the GDN layers' outputs (and conditions) and every state field of both slots are
// bit for bit the same after every op, and hybrid's outputs are finite and non-zero.
class Mamba2Hybrid : public ::testing::TestWithParam<HMode> {};

TEST_P(Mamba2Hybrid, GdnLayersUnchangedByMamba2Layers) {
  const HMode mode = GetParam();
  const uint64_t seed = 31;
  Case hyb("hybrid-odd", mode, gen_of(seed, 0.5, true));
  SCOPED_TRACE(hyb.name() + " (seed=" + std::to_string(seed) + ")");
  std::vector<size_t> gdn_layers;
  Model gm;
  gm.spec.name = "hybrid-odd-gdn-only";
  for (size_t l = 0; l < hyb.spec.layers.size(); ++l)
    if (hyb.spec.layers[l].kind == LayerKind::gdn) {
      gdn_layers.push_back(l);
      gm.spec.layers.push_back(hyb.spec.layers[l]);
      gm.weights.push_back(hyb.model.weights[l]);
    }
  ASSERT_EQ(gdn_layers.size(), 2u);
  ASSERT_EQ(hyb.spec.layers.size(), 4u);
  ref::ReferenceBackend gdn;
  gdn.create_pool(gm, hyb.pool);

  auto cut = [&](const StepInputs& in) {
    StepInputs o;
    o.rows = in.rows;
    for (size_t l : gdn_layers) o.layers.push_back(in.layers[l]);
    return o;
  };
  auto same_outputs = [&](const std::vector<StepOutputs>& a, const std::vector<StepOutputs>& b,
                          const std::vector<int>& slots, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      if (slots[i] == kPadRow) continue;
      expect_finite_nonzero(a[i], what);
      for (size_t g = 0; g < gdn_layers.size(); ++g) {
        EXPECT_TRUE(bits_equal(a[i].layers[gdn_layers[g]], b[i].layers[g])) << what << " gdn layer " << gdn_layers[g];
        EXPECT_TRUE(bits_equal(a[i].condition[gdn_layers[g]], b[i].condition[g]))
            << what << " condition, gdn layer " << gdn_layers[g];
      }
    }
  };
  std::vector<int> claimed;
  auto same_states = [&](const std::string& what) {
    for (int slot : claimed) {
      const SequenceState a = hyb.backend->export_state(slot), b = gdn.export_state(slot);
      EXPECT_EQ(a.last_verify_k, b.last_verify_k) << what << " slot " << slot;
      for (size_t g = 0; g < gdn_layers.size(); ++g) {
        SequenceState x, y;
        x.layers = {a.layers[gdn_layers[g]]};
        y.layers = {b.layers[g]};
        EXPECT_EQ(state_diff(x, y, false), "") << what << " slot " << slot << " gdn layer " << gdn_layers[g];
      }
      for (size_t l = 0; l < hyb.spec.layers.size(); ++l) {  // every kind's fields in its own shape
        EXPECT_EQ(a.layers[l].h.shape(), hyb.spec.layers[l].h_shape()) << what << " layer " << l;
        EXPECT_EQ(a.layers[l].conv.shape(), conv_shape(hyb.spec.layers[l])) << what << " layer " << l;
      }
    }
  };
  int step = 0;
  auto batch = [&](OpKind kind, const std::vector<int>& slots, int rows, const std::string& what) {
    ++step;
    std::vector<StepInputs> hin, gin;
    for (size_t i = 0; i < slots.size(); ++i) {
      hin.push_back(make_inputs(hyb.spec, hyb.gen, step, slots[i] == kPadRow ? 99 : slots[i], int(i), rows));
      gin.push_back(cut(hin.back()));
    }
    if (kind == OpKind::decode) same_outputs(hyb.backend->decode(slots, hin), gdn.decode(slots, gin), slots, what);
    else same_outputs(hyb.backend->verify(slots, rows, VerifyArm::exact, hin), gdn.verify(slots, rows, VerifyArm::exact, gin), slots, what);
    same_states(what);
  };
  auto prefill = [&](int slot, int rows, const std::string& what) {
    const StepInputs in = make_inputs(hyb.spec, hyb.gen, ++step, slot, 0, rows);
    same_outputs({hyb.backend->prefill(slot, in)}, {gdn.prefill(slot, cut(in))}, {slot}, what);
    same_states(what);
  };
  auto both = [&](auto&& op, const std::string& what) {
    op(*hyb.backend);
    op(gdn);
    same_states(what);
  };

  for (int s = 0; s < 2; ++s) {
    ASSERT_EQ(hyb.backend->alloc(0), s);
    ASSERT_EQ(gdn.alloc(0), s);
    claimed.push_back(s);
  }
  prefill(0, 4, "prefill 4 @0");
  prefill(1, 2, "prefill 2 @1");
  batch(OpKind::decode, {0, kPadRow, 1}, 1, "decode @0,pad,1");
  both([](Backend& b) { b.checkpoint(0, false); }, "checkpoint @0");
  both([](Backend& b) { b.checkpoint(1, true); }, "checkpoint_async @1");
  batch(OpKind::verify, {1, kPadRow, 0}, 3, "verify 3 @1,pad,0");
  both([](Backend& b) { b.commit(0, 2, 3); }, "commit 2 3 @0");
  both([](Backend& b) { b.rollback(1, 2, false); }, "rollback 2 @1");
  batch(OpKind::decode, {0}, 1, "decode @0");
  batch(OpKind::verify, {0}, 4, "verify 4 @0");
  both([](Backend& b) { b.rollback(0, 1, true); }, "rollback_and_checkpoint_async 1 @0");
  both([](Backend& b) { b.rollback(1, 0, false); }, "rollback 0 @1");
  both([](Backend& b) { b.snapshot_save(0, 1); }, "snapshot_save 1 @0");
  batch(OpKind::decode, {0, 1}, 1, "decode @0,1");
  both([](Backend& b) { b.snapshot_restore(0, 1); }, "snapshot_restore 1 @0");
  if (mode == HMode::f16) {
    prefill(1, 2, "prefill 2 @1 (widens FP16 h back)");
    both([](Backend& b) { b.to_f16(1); }, "to_f16 @1");
    EXPECT_TRUE(hyb.backend->export_state(1).layers[1].h_is_f16);
  }
  batch(OpKind::decode, {1}, 1, "decode @1");
  claimed.pop_back();
  both([](Backend& b) { b.release(1); }, "release @1");
  ASSERT_EQ(hyb.backend->alloc(0), 1);
  ASSERT_EQ(gdn.alloc(0), 1);
  claimed.push_back(1);
  for (const LayerState& L : hyb.backend->export_state(1).layers)
    for (int64_t i = 0; i < L.h.size(); ++i) ASSERT_EQ(L.h.get(i), 0.0f) << "a reused slot is not zeroed";
  batch(OpKind::decode, {1, 0}, 1, "decode @1,0 after release and alloc");
}

INSTANTIATE_TEST_SUITE_P(Modes, Mamba2Hybrid, ::testing::Values(HMode::f32, HMode::f16, HMode::f16_pool),
                         [](const ::testing::TestParamInfo<HMode>& info) {
                           std::string s = to_string(info.param);
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// ---------------------------------------------------------------------------------------------
// 6. Nemotron-H geometry
// ---------------------------------------------------------------------------------------------

// nemotron-h-8b: 24 layers of nh=128, hp=64, ns=128, ng=8 (in_proj 18560 = xBC 10240 + dt 128 +
// z 8192); one layer of it decodes one token, finite, non-zero and as the oracle computes it.
TEST(Mamba2Nemotron, GeometryAndOneDecode) {
  EXPECT_EQ(make_preset("nemotron-h-8b").layers.size(), 24u);
  const ModelSpec spec = make_preset("nemotron-h-8b", 1);
  ASSERT_EQ(spec.layers.size(), 1u);
  const LayerSpec& s = spec.layers[0];
  EXPECT_EQ(s.kind, LayerKind::mamba2);
  EXPECT_EQ(s.conv_dim(), 10240);
  EXPECT_EQ(s.h_shape(), (std::vector<int64_t>{128, 64, 128}));
  EXPECT_EQ(s.d_inner(), 8192);
  EXPECT_EQ(s.out_dim(), 8192);
  EXPECT_EQ(s.heads_per_group(), 16);
  EXPECT_EQ(s.input_floats_per_row(), 18560);
  EXPECT_TRUE(s.conv_bias);
  EXPECT_FALSE(s.norm_before_gate);
  EXPECT_EQ(s.eps, 1e-5f);
  const std::vector<WeightField> w = s.weights();
  ASSERT_EQ(w.size(), 6u);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"conv_w", {10240, 4}}, {"conv_bias", {10240}}, {"A_log", {128}}, {"dt_bias", {128}}, {"D", {128}}, {"norm_w", {8192}}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(w[i].name, want[i].first);
    EXPECT_EQ(w[i].shape, want[i].second) << w[i].name;
  }

  const uint64_t seed = 1;
  Case c(spec, HMode::f32, gen_of(seed, 0.5, false), 1, 1);
  SCOPED_TRACE(c.name() + " (seed=" + std::to_string(seed) + ")");
  Oracle o(c.model, HMode::f32);
  ASSERT_EQ(c.backend->alloc(0), 0);
  const StepInputs in = c.inputs(0, 1);
  const StepOutputs out = c.backend->decode({0}, {in})[0];
  ASSERT_EQ(out.layers[0].size(), 8192u);
  expect_finite_nonzero(out, "decode");
  const SequenceState st = c.backend->export_state(0);
  EXPECT_EQ(st.layers[0].h.shape(), (std::vector<int64_t>{128, 64, 128}));
  EXPECT_EQ(st.layers[0].conv.shape(), (std::vector<int64_t>{10240, 4}));
  EXPECT_EQ(output_mismatch(s, out.layers[0], o.decode(in)[0], 1), "");
  EXPECT_EQ(h_mismatch(s, st.layers[0].h, o.layer(0)), "");
  EXPECT_EQ(conv_mismatch(st.layers[0].conv, o.layer(0)), "");
}

}  // namespace
}  // namespace ssm::test
