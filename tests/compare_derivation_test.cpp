// The measurement behind Tolerances::defaults() (docs/tolerances.md): an FP32-compute
// emulation of the GPU's decode step, storing h where the GPU stores it, run against the FP64
// reference for many steps on several shapes, decays and value scales. It prints the measured
// errors per horizon and checks that (1) every default holds with margin over what was
// measured and (2) the FP16 error does not grow with the horizon (the reference rounds where
// the GPU rounds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "compare/compare.h"
#include "core/half.h"
#include "fixtures/generators.h"
#include "reference/gdn_math.h"

namespace ssm::cmp {
namespace {

// One token of one layer in FP32 arithmetic (what a CUDA kernel does), same formulas and
// store points as reference/gdn_step.cpp.
// drift: adds drift ULPs of the head's largest |o| to every o_j before the norm (an injected
// bias in the output path, for the test that the condition term does not hide one).
// state_drift: adds one ULP of the head's largest |H| to every element of H before it is stored
// (a bias of one ULP per row in the state, for the same test on the state's condition).
void step_f32(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window, const float* x,
              const float* a, const float* b, const float* z, float* out, int drift = 0,
              bool state_drift = false) {
  const int C = s.conv_dim(), D = s.d_conv;
  std::vector<float> y(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    float* win = window + size_t(c) * size_t(D);
    for (int j = 0; j + 1 < D; ++j) win[j] = win[j + 1];
    win[D - 1] = x[c];
    float acc = s.conv_bias ? w.conv_bias[size_t(c)] : 0.0f;
    for (int j = 0; j < D; ++j) acc += w.conv_w[size_t(c) * size_t(D) + size_t(j)] * win[j];
    y[size_t(c)] = acc / (1.0f + std::exp(-acc));
  }
  for (int head = 0; head < 2 * s.nk; ++head) {
    float ss = 0;
    for (int i = 0; i < s.kd; ++i) ss += y[size_t(head * s.kd + i)] * y[size_t(head * s.kd + i)];
    const float r = 1.0f / std::sqrt(ss + 1e-6f);
    for (int i = 0; i < s.kd; ++i) y[size_t(head * s.kd + i)] *= r;
  }
  const float qscale = 1.0f / std::sqrt(float(s.kd));
  std::vector<float> H(size_t(s.kd) * size_t(s.vd)), hk(size_t(s.vd)), vn(size_t(s.vd)), o(size_t(s.vd));
  for (int vh = 0; vh < s.nv; ++vh) {
    const float beta = 1.0f / (1.0f + std::exp(-b[vh]));
    const float dt = std::log1p(std::exp(std::min(a[vh] + w.dt_bias[size_t(vh)], 20.0f)));
    const float A = std::exp(std::min(w.A_log[size_t(vh)], 20.0f));
    const float g = std::clamp(std::exp(-A * dt), 1e-6f, 1.0f - 1e-6f);
    const int kh = vh / s.heads_per_key();
    const float* q = y.data() + size_t(kh) * size_t(s.kd);
    const float* k = y.data() + size_t(s.nk + kh) * size_t(s.kd);
    const float* v = y.data() + size_t(2 * s.nk * s.kd) + size_t(vh) * size_t(s.vd);
    const int64_t base = int64_t(vh) * s.kd * s.vd;
    for (int64_t e = 0; e < int64_t(H.size()); ++e) H[size_t(e)] = h.get(base + e);
    for (int j = 0; j < s.vd; ++j) {
      float acc = 0;
      for (int i = 0; i < s.kd; ++i) acc += H[size_t(i * s.vd + j)] * k[i];
      hk[size_t(j)] = acc;
      vn[size_t(j)] = (v[j] - g * acc) * beta;
    }
    float hmax = 0;
    for (int i = 0; i < s.kd; ++i)
      for (int j = 0; j < s.vd; ++j) {
        float& hij = H[size_t(i * s.vd + j)];
        hij = g * hij + k[i] * vn[size_t(j)];
        hmax = std::max(hmax, std::fabs(hij));
      }
    const float hulp = state_drift ? std::nextafter(hmax, 1e30f) - hmax : 0.0f;
    for (int i = 0; i < s.kd; ++i)
      for (int j = 0; j < s.vd; ++j) {
        float& hij = H[size_t(i * s.vd + j)];
        hij += hulp;
        const size_t e = size_t(base + i * s.vd + j);
        if (h.dtype() == DType::f32) {
          h.f32()[e] = hij;
        } else {
          h.f16()[e] = store_half_clamped(hij);
          hij = half_to_float(h.f16()[e]);  // the output reads the stored state
        }
      }
    float ms = 0, omax = 0;
    for (int j = 0; j < s.vd; ++j) {
      float acc = 0;
      for (int i = 0; i < s.kd; ++i) acc += H[size_t(i * s.vd + j)] * q[i];
      o[size_t(j)] = acc * qscale;
      omax = std::max(omax, std::fabs(o[size_t(j)]));
    }
    if (drift) {
      const float ulp = std::nextafter(omax, 1e30f) - omax;
      for (int j = 0; j < s.vd; ++j) o[size_t(j)] += float(drift) * ulp;
    }
    for (int j = 0; j < s.vd; ++j) ms += o[size_t(j)] * o[size_t(j)];
    const float r = 1.0f / std::sqrt(ms / float(s.vd) + s.eps);
    for (int j = 0; j < s.vd; ++j) {
      const float zj = z[size_t(vh) * size_t(s.vd) + size_t(j)];
      const float sig = 1.0f / (1.0f + std::exp(-zj));
      const float gate = s.output_gate == OutputGate::silu ? zj * sig : sig;
      out[size_t(vh) * size_t(s.vd) + size_t(j)] = o[size_t(j)] * r * w.norm_w[size_t(j)] * gate;
    }
  }
}

struct Measured {
  double sulp = 0;       // FP16 h: max |d| in FP16 ULPs at max(|ref|, rms(ref)) (the fp16-state unit)
  double h_nrmse = 0;    // h: rms(d) / rms(ref)
  double h_atol = 0;     // FP32 h: smallest atol passing with the default rtol
  double out_atol = 0;   // outputs: smallest atol passing with the class's default rtol
  double out_nrmse = 0;
  double out_cond = 0;   // outputs: max |d| / (u * condition), the `cond` that alone covers every element
  double h_cond = 0;     // FP32 h: max |d| / (u * the state's carried condition)
  void max_with(const Measured& m) {
    h_cond = std::max(h_cond, m.h_cond);
    out_cond = std::max(out_cond, m.out_cond);
    sulp = std::max(sulp, m.sulp);
    h_nrmse = std::max(h_nrmse, m.h_nrmse);
    h_atol = std::max(h_atol, m.h_atol);
    out_atol = std::max(out_atol, m.out_atol);
    out_nrmse = std::max(out_nrmse, m.out_nrmse);
  }
};

// Runs `steps` decode steps of one layer from zero state in both arithmetics; returns the
// worst errors over the first and the second half of the horizon.
std::pair<Measured, Measured> measure(const LayerSpec& s, DType hd, double decay, double vscale, uint64_t seed,
                                      int steps) {
  ModelSpec spec{"measure", {s}};
  GenConfig g;
  g.seed = seed;
  g.decay = decay;
  g.value_scale = vscale;
  const Model m = make_model(spec, g);
  Tensor h_ref = Tensor::zeros(hd, h_shape(s)), h_emu = h_ref;
  Tensor w_ref = Tensor::zeros(DType::f32, conv_shape(s)), w_emu = w_ref;
  std::vector<float> o_ref(size_t(s.out_dim())), o_emu(o_ref.size()), c_ref(o_ref.size());
  ref::StateCondition hc_ref = ref::fresh_gdn_state_condition(s);  // the state's condition
  // Limits that never fail: only the measured quantities matter here; rtol as the defaults.
  const Tolerances d = Tolerances::defaults();
  Tolerances loose = d;
  loose.fp16_state = Tolerance{0, 0, 1e9, 1e9};
  loose.fp32_state = Tolerance{0, d.fp32_state.rtol, 0, 1e9};
  loose.output = Tolerance{0, d.output.rtol, 0, 1e9, 0};
  loose.output_f16 = Tolerance{0, d.output_f16.rtol, 0, 1e9, 0};
  std::pair<Measured, Measured> halves;
  for (int t = 0; t < steps; ++t) {
    const StepInputs in = make_inputs(spec, g, t, 0, 0, 1);
    const LayerRows& r = in.layers[0];
    ref::gdn_step(s, m.weights[0], h_ref, w_ref.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(),
                  r.gate_in.data(), o_ref.data(), c_ref.data(), &hc_ref);
    step_f32(s, m.weights[0], h_emu, w_emu.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(), r.gate_in.data(),
             o_emu.data());
    EXPECT_TRUE(w_ref.bit_equal(w_emu)) << "conv windows are data movement: exact";
    Where wh;
    wh.tensor = "h";
    const Tensor hc = broadcast_condition(hc_ref.rho, h_ref.shape());
    const TensorReport hr = compare_tensor(h_ref, h_emu, class_of("h", hd), loose, wh, true, &hc);
    EXPECT_TRUE(hr.measured) << hr.text();
    Tensor tr = Tensor::zeros(DType::f32, {1, s.nv, s.vd}), tg = tr;
    std::copy(o_ref.begin(), o_ref.end(), tr.f32());
    std::copy(o_emu.begin(), o_emu.end(), tg.f32());
    Where wo;
    wo.tensor = "output";
    Tensor tc = tr;
    std::copy(c_ref.begin(), c_ref.end(), tc.f32());
    const TensorReport orr = compare_tensor(tr, tg, class_of("output", hd), loose, wo, false, &tc);
    EXPECT_TRUE(orr.measured) << orr.text();
    Measured mm;
    mm.sulp = hr.max_ulp_scaled;
    mm.h_nrmse = hr.nrmse;
    mm.h_atol = hd == DType::f32 ? hr.smallest_passing.atol : 0;
    mm.h_cond = hd == DType::f32 ? hr.max_cond_ratio : 0;
    mm.out_atol = orr.smallest_passing.atol;
    mm.out_nrmse = orr.nrmse;
    mm.out_cond = orr.max_cond_ratio;
    (t < steps / 2 ? halves.first : halves.second).max_with(mm);
  }
  return halves;
}

LayerSpec gdn(int nk, int nv, int kd, int vd, int d_conv) {
  LayerSpec s;
  s.nk = nk;
  s.nv = nv;
  s.kd = kd;
  s.vd = vd;
  s.d_conv = d_conv;
  return s;
}

TEST(compare_derivation, defaults_hold_with_margin_and_fp16_error_does_not_grow) {
  const Tolerances d = Tolerances::defaults();
  const std::vector<LayerSpec> shapes = {make_preset("tiny").layers[0], make_preset("odd-a").layers[0],
                                         make_preset("odd-b").layers[0], make_preset("odd-c").layers[0],
                                         gdn(1, 2, 128, 128, 4)};
  Measured w16, w32;
  std::printf("%-38s %-4s %-5s %-4s %-5s| %-17s| %-21s| %-21s| %-21s\n", "shape", "h", "decay", "vsc", "steps",
              "ulp@scale 1st/2nd", "h nrmse 1st/2nd", "out atol 1st/2nd", "out nrmse 1st/2nd");
  for (const LayerSpec& s : shapes)
    for (DType hd : {DType::f16, DType::f32})
      for (double decay : {0.0, 0.5, 1.0})
        for (double vscale : {1.0, 4.0}) {
          const uint64_t seed = 1000 + uint64_t(s.kd) * 7 + uint64_t(s.vd);
          const bool big = s.h_elems() > 10000;
          const int steps = big ? 256 : 1024;
          SCOPED_TRACE(s.name() + " h=" + to_string(hd) + " decay=" + std::to_string(decay) +
                       " vscale=" + std::to_string(vscale) + " seed=" + std::to_string(seed));
          const auto [first, second] = measure(s, hd, decay, vscale, seed, steps);
          std::printf("%-38s %-4s %-5.1f %-4.0f %-5d| %7.1f / %-7.1f | %8.3g / %-9.3g | %8.3g / %-9.3g | %8.3g / %-9.3g\n",
                      s.name().c_str(), to_string(hd), decay, vscale, steps, first.sulp, second.sulp, first.h_nrmse,
                      second.h_nrmse, first.out_atol, second.out_atol, first.out_nrmse, second.out_nrmse);
          if (hd == DType::f32)
            std::printf("    fp32-state |d|/(u G) 1st/2nd: %.3g / %.3g\n", first.h_cond, second.h_cond);
          Measured both = first;
          both.max_with(second);
          (hd == DType::f16 ? w16 : w32).max_with(both);
          if (hd == DType::f16 && !big) {
            // Horizon independence, past the transient of filling h from zero: the second
            // 512 steps are no worse than twice the first 512 plus a small constant.
            EXPECT_LE(second.sulp, 2 * first.sulp + 4);
            EXPECT_LE(second.h_nrmse, 2 * first.h_nrmse + 2e-4);
          }
        }
  std::printf("worst fp16-state: %.1f ulp at scale, nrmse %.3g   (defaults: max_ulp %g, max_nrmse %g)\n", w16.sulp,
              w16.h_nrmse, d.fp16_state.max_ulp, d.fp16_state.max_nrmse);
  std::printf("worst fp32-state: atol %.3g at rtol %g, nrmse %.3g   (defaults: atol %g, max_nrmse %g)\n", w32.h_atol,
              d.fp32_state.rtol, w32.h_nrmse, d.fp32_state.atol, d.fp32_state.max_nrmse);
  std::printf("worst output:     atol %.3g at rtol %g, nrmse %.3g   (defaults: atol %g, max_nrmse %g)\n", w32.out_atol,
              d.output.rtol, w32.out_nrmse, d.output.atol, d.output.max_nrmse);
  std::printf("worst output-f16: atol %.3g at rtol %g, nrmse %.3g   (defaults: atol %g, max_nrmse %g)\n",
              w16.out_atol, d.output_f16.rtol, w16.out_nrmse, d.output_f16.atol, d.output_f16.max_nrmse);
  std::printf("worst |d| / (u * condition): fp32-state %.3g, output %.3g, output-f16 %.3g   (defaults: cond %g, %g, "
              "%g)\n", w32.h_cond, w32.out_cond, w16.out_cond, d.fp32_state.cond, d.output.cond, d.output_f16.cond);
  // Each default is at least twice the worst measurement (docs/tolerances.md).
  EXPECT_LE(2 * w16.sulp, d.fp16_state.max_ulp);
  EXPECT_LE(2 * w16.h_nrmse, d.fp16_state.max_nrmse);
  EXPECT_LE(2 * w32.h_atol, d.fp32_state.atol);
  EXPECT_LE(2 * w32.h_nrmse, d.fp32_state.max_nrmse);
  EXPECT_LE(2 * w32.out_atol, d.output.atol);
  EXPECT_LE(2 * w32.out_nrmse, d.output.max_nrmse);
  EXPECT_LE(2 * w16.out_atol, d.output_f16.atol);
  EXPECT_LE(2 * w16.out_nrmse, d.output_f16.max_nrmse);
  EXPECT_LE(2 * w32.h_cond, d.fp32_state.cond);
  EXPECT_LE(2 * w32.out_cond, d.output.cond);
  EXPECT_LE(2 * w16.out_cond, d.output_f16.cond);
}

// The false alarm the condition term exists for (an H200 campaign, odd-b, a fresh decode): a
// value head whose o = H^T q / sqrt(kd) cancels 10^4-fold, so plain FP32 rounding of the dot
// products gives a normalised output error far above max_nrmse with no element over its own
// limit. Rebuilt here from a seeded state: H's component along q is removed but for 1e-4 of it.
// The head passes once the reference's condition is used; without it, it fails as it did; and a
// drift of one ULP per step injected into the output path still fails on ordinary data.
TEST(compare_derivation, cancelling_head_passes_with_its_condition_and_a_drift_still_fails) {
  const LayerSpec s = make_preset("odd-b").layers[0];
  ModelSpec spec{"cancel", {s}};
  GenConfig g;
  g.seed = 20261130;
  std::printf("case: %s %s\n", s.name().c_str(), g.name().c_str());
  const Model m = make_model(spec, g);
  // a realistic state: 64 decode steps of the reference
  Tensor h = Tensor::zeros(DType::f32, h_shape(s)), win = Tensor::zeros(DType::f32, conv_shape(s));
  std::vector<float> out(size_t(s.out_dim()));
  for (int t = 0; t < 64; ++t) {
    const StepInputs in = make_inputs(spec, g, t, 0, 0, 1);
    const LayerRows& r = in.layers[0];
    ref::gdn_step(s, m.weights[0], h, win.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(), r.gate_in.data(),
                  out.data());
  }
  const int vh = 0;
  ref::MatD H(s.kd, s.vd);
  for (int i = 0; i < s.kd; ++i)
    for (int j = 0; j < s.vd; ++j) H(i, j) = h.get(int64_t(vh) * s.kd * s.vd + int64_t(i) * s.vd + j);
  ref::VecD q(s.kd);
  for (int i = 0; i < s.kd; ++i) q[i] = hash_uniform(g.seed, 77, uint64_t(i), 0, -1.0, 1.0);
  q /= q.norm();
  H -= (1.0 - 1e-4) * q * (q.transpose() * H);  // o = H^T q keeps 1e-4 of its magnitude
  for (int i = 0; i < s.kd; ++i)
    for (int j = 0; j < s.vd; ++j) H(i, j) = double(float(H(i, j)));  // the FP32 state both sides hold
  ref::VecD qf = q.cast<float>().cast<double>();
  std::vector<float> z(size_t(s.vd));
  for (int j = 0; j < s.vd; ++j) z[size_t(j)] = round_bf16(float(hash_uniform(g.seed, 78, uint64_t(j), 0, -2, 2)));
  const double qscale = 1.0 / std::sqrt(double(s.kd));
  // reference: FP64 value and its condition, as reference/gdn_step.cpp computes them
  const ref::VecD o = H.transpose() * qf * qscale;
  const ref::VecD ref_out = ref::output_norm(s, m.weights[0], o, z.data());
  const double rms = std::sqrt(H.squaredNorm() / double(H.size()));
  const ref::VecD S = H.cwiseAbs().cwiseMax(rms).transpose() * qf.cwiseAbs() * qscale;
  const ref::VecD cond = ref::output_norm_condition(s, m.weights[0], o, S, z.data());
  // an FP32 implementation: natural-order FP32 dot products and norm
  std::vector<float> of(size_t(s.vd));
  float ms = 0;
  for (int j = 0; j < s.vd; ++j) {
    float acc = 0;
    for (int i = 0; i < s.kd; ++i) acc += float(H(i, j)) * float(qf[i]);
    of[size_t(j)] = acc * float(qscale);
    ms += of[size_t(j)] * of[size_t(j)];
  }
  const float rr = 1.0f / std::sqrt(ms / float(s.vd) + s.eps);
  Tensor tr = Tensor::zeros(DType::f32, {1, 1, s.vd}), tg = tr, tc = tr;
  for (int j = 0; j < s.vd; ++j) {
    const float zj = z[size_t(j)];
    tr.f32()[j] = float(ref_out[j]);
    tc.f32()[j] = float(cond[j]);
    const float sig = 1.0f / (1.0f + std::exp(-zj));
    const float gate = s.output_gate == OutputGate::silu ? zj * sig : sig;
    tg.f32()[j] = of[size_t(j)] * rr * m.weights[0].norm_w[size_t(j)] * gate;
  }
  double sum_abs = 0;
  for (int i = 0; i < s.kd; ++i) sum_abs += std::fabs(H(i, 0) * qf[i]);
  std::printf("head %d: o[0] = %.3g, sum |H_i0 q_i| = %.3g (cancellation %.0f-fold)\n", vh, o[0] / qscale, sum_abs,
              sum_abs / std::fabs(o[0] / qscale));
  Where w;
  w.tensor = "output";
  const Tolerances d = Tolerances::defaults();
  const TensorReport plain = compare_tensor(tr, tg, TolClass::output, d, w, false, nullptr);
  std::printf("without the condition: %s\n", plain.pass ? "pass" : plain.failure.c_str());
  EXPECT_FALSE(plain.pass) << "the case no longer reproduces the false alarm:\n" << plain.text();
  const TensorReport with = compare_tensor(tr, tg, TolClass::output, d, w, false, &tc);
  EXPECT_TRUE(with.pass) << with.text();
  std::printf("with the condition: %s, max |d| / (u cond) = %.3g\n", with.pass ? "pass" : "FAIL", with.max_cond_ratio);

  // A drift of one ULP per step in the output path, on ordinary data, fails within the horizon.
  const LayerSpec s2 = make_preset("odd-a").layers[0];
  ModelSpec spec2{"drift", {s2}};
  const Model m2 = make_model(spec2, g);
  Tensor h_ref = Tensor::zeros(DType::f32, h_shape(s2)), h_emu = h_ref;
  Tensor w_ref = Tensor::zeros(DType::f32, conv_shape(s2)), w_emu = w_ref;
  std::vector<float> o_ref(size_t(s2.out_dim())), o_emu(o_ref.size()), c_ref(o_ref.size());
  int failed_at = -1;
  for (int t = 0; t < 1024 && failed_at < 0; ++t) {
    const StepInputs in = make_inputs(spec2, g, t, 0, 0, 1);
    const LayerRows& r = in.layers[0];
    ref::gdn_step(s2, m2.weights[0], h_ref, w_ref.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(),
                  r.gate_in.data(), o_ref.data(), c_ref.data());
    step_f32(s2, m2.weights[0], h_emu, w_emu.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(),
             r.gate_in.data(), o_emu.data(), t);
    Tensor a = Tensor::zeros(DType::f32, {1, s2.nv, s2.vd}), b = a, c = a;
    std::copy(o_ref.begin(), o_ref.end(), a.f32());
    std::copy(o_emu.begin(), o_emu.end(), b.f32());
    std::copy(c_ref.begin(), c_ref.end(), c.f32());
    if (!compare_tensor(a, b, TolClass::output, d, w, false, &c).pass) failed_at = t;
  }
  std::printf("a drift of 1 ULP per step fails at step %d\n", failed_at);
  EXPECT_GE(failed_at, 0) << "a drift of one ULP per step passed 1024 steps under the condition-aware limits";
}

// The false alarm the state's carried condition exists for: a delta-rule memory written at value
// scale 1e4 and then overwritten, key for key, at value scale 1 (beta near 1, no decay). The update
// g (I - beta k k^T) H cancels the old memory 1e4-fold, an FP32 implementation keeps about u |H_old|
// of it, and the new state sits outside rtol at its own scale although both sides are correct.
// With the reference's condition it passes; a bias of one ULP per row in the state, on ordinary
// data, still fails.
TEST(compare_derivation, erased_memory_passes_with_the_state_condition_and_a_state_drift_still_fails) {
  const LayerSpec s = make_preset("odd-a").layers[0];
  ModelSpec spec{"erase", {s}};
  GenConfig g;
  g.seed = 20261130;
  std::printf("case: %s %s\n", s.name().c_str(), g.name().c_str());
  const Model m = make_model(spec, g);
  Tensor h_ref = Tensor::zeros(DType::f32, h_shape(s)), h_emu = h_ref;
  Tensor w_ref = Tensor::zeros(DType::f32, conv_shape(s)), w_emu = w_ref;
  ref::StateCondition hc = ref::fresh_gdn_state_condition(s);
  std::vector<float> o_ref(size_t(s.out_dim())), o_emu(o_ref.size()), c_ref(o_ref.size());
  const int qk = 2 * s.nk * s.kd;
  LayerRows r;
  r.conv_in.resize(size_t(s.conv_dim()));
  r.dt_in.assign(size_t(s.nv), -30.0f);   // dt ~ e^-30: g clamps at 1 - 1e-6 (no forgetting)
  r.beta_in.assign(size_t(s.nv), 20.0f);  // beta = 1 - 2e-9: each row replaces the column along k
  r.gate_in.assign(size_t(s.out_dim()), 1.0f);
  for (int c = 0; c < qk; ++c) r.conv_in[size_t(c)] = float(hash_uniform(g.seed, 90, uint64_t(c), 0, 0.5, 1.5));
  Where w;
  w.tensor = "h";
  const Tolerances d = Tolerances::defaults();
  // phase 0 fills the conv window with the key's input (values zero: nothing is written), so every
  // later row has the same k; phase 1 writes a large memory, phase 2 overwrites it
  for (int phase = 0; phase < 3; ++phase) {
    const double scale = phase == 0 ? 0.0 : phase == 1 ? 1e4 : 1.0;
    for (int c = qk; c < s.conv_dim(); ++c)
      r.conv_in[size_t(c)] = float(scale * hash_uniform(g.seed, 91 + uint64_t(phase), uint64_t(c), 0, 0.5, 1.5));
    for (int t = 0; t < 2 * s.d_conv; ++t) {  // the window fills with the phase's input
      ref::gdn_step(s, m.weights[0], h_ref, w_ref.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(),
                    r.gate_in.data(), o_ref.data(), c_ref.data(), &hc);
      step_f32(s, m.weights[0], h_emu, w_emu.f32(), r.conv_in.data(), r.dt_in.data(), r.beta_in.data(),
               r.gate_in.data(), o_emu.data());
    }
  }
  double rms = 0;
  for (int64_t i = 0; i < h_ref.size(); ++i) rms += double(h_ref.f32()[i]) * h_ref.f32()[i];
  std::printf("after the overwrite: rms(h) = %.3g (the erased memory was about 1e4)\n",
              std::sqrt(rms / double(h_ref.size())));
  const TensorReport plain = compare_tensor(h_ref, h_emu, TolClass::fp32_state, d, w, true);
  std::printf("without the condition: %s\n", plain.pass ? "pass" : plain.failure.c_str());
  EXPECT_FALSE(plain.pass) << "the case no longer reproduces the false alarm:\n" << plain.text();
  const Tensor cond = broadcast_condition(hc.rho, h_ref.shape());
  const TensorReport with = compare_tensor(h_ref, h_emu, TolClass::fp32_state, d, w, true, &cond);
  EXPECT_TRUE(with.pass) << with.text();
  std::printf("with the condition: %s, max |d| / (u cond) = %.3g\n", with.pass ? "pass" : "FAIL",
              with.max_cond_ratio);

  // A bias of one ULP per row in the state, on ordinary data without forgetting (decay 0: g about
  // 1 - 1e-4, so the bias accumulates instead of decaying away), fails within the horizon.
  GenConfig g0 = g;
  g0.decay = 0.0;
  const Model m0 = make_model(spec, g0);
  Tensor a = Tensor::zeros(DType::f32, h_shape(s)), b = a;
  Tensor wa = Tensor::zeros(DType::f32, conv_shape(s)), wb = wa;
  ref::StateCondition hc2 = ref::fresh_gdn_state_condition(s);
  int failed_at = -1, failed_plain_at = -1;
  for (int t = 0; t < 1024 && failed_at < 0; ++t) {
    const StepInputs in = make_inputs(spec, g0, t, 0, 0, 1);
    const LayerRows& rr = in.layers[0];
    ref::gdn_step(s, m0.weights[0], a, wa.f32(), rr.conv_in.data(), rr.dt_in.data(), rr.beta_in.data(),
                  rr.gate_in.data(), o_ref.data(), c_ref.data(), &hc2);
    step_f32(s, m0.weights[0], b, wb.f32(), rr.conv_in.data(), rr.dt_in.data(), rr.beta_in.data(), rr.gate_in.data(),
             o_emu.data(), 0, true);
    const Tensor c2 = broadcast_condition(hc2.rho, a.shape());
    if (failed_plain_at < 0 && !compare_tensor(a, b, TolClass::fp32_state, d, w, true).pass) failed_plain_at = t;
    if (!compare_tensor(a, b, TolClass::fp32_state, d, w, true, &c2).pass) failed_at = t;
  }
  std::printf("a state bias of 1 ULP per row fails at row %d (at row %d under the fixed limits alone)\n", failed_at,
              failed_plain_at);
  EXPECT_GE(failed_at, 0) << "a bias of one ULP per row in the state passed 1024 rows under the conditioned limits";
}

// FP16's overflow boundary (docs/tolerances.md), the measurement: `fuzz --backend cuda --preset
// mamba-wide --seed 1`, case 218, stored one FP16 h element as inf in the reference, whose FP32
// pre-store value was 65520.004, and as 65504 on CUDA. The numbers the judge's rule rests on:
TEST(compare_derivation, fp16_overflow_boundary_is_one_fp32_rounding_and_one_fp16_step) {
  const float threshold = 65520.0f;  // the midpoint between 65504 and 2^16: ties to even 2^16, inf
  const float above = std::nextafter(threshold, INFINITY), below = std::nextafter(threshold, 0.0f);
  // FP32 spacing in [2^15, 2^16) is 2^-8; one FP32 rounding moves a value by at most half of it,
  // 2^-9, within the textbook bound u |x| = 2^-24 65520 = 0.0039 (just under 2^-8); every FP32
  // operation before the store rounds once
  EXPECT_EQ(double(above) - double(threshold), std::ldexp(1.0, -8));
  EXPECT_EQ(double(threshold) - double(below), std::ldexp(1.0, -8));
  EXPECT_GE(kUnitRoundoffF32 * 65520.0, std::ldexp(1.0, -9));
  EXPECT_LT(kUnitRoundoffF32 * 65520.0, std::ldexp(1.0, -8));
  EXPECT_NEAR(above, 65520.004f, 1e-3f);  // the reference's pre-store value in case 218
  // round to nearest even (the converter, --f16-store inf) puts the threshold itself and the
  // value one FP32 step above it at inf, one FP32 step below at 65504: values one FP32 spacing
  // apart (two roundings of one exact value near 65520) can store on both sides
  EXPECT_EQ(float_to_half_rne(threshold), 0x7c00);
  EXPECT_EQ(float_to_half_rne(above), 0x7c00);
  EXPECT_EQ(float_to_half_rne(below), 0x7bff);
  // the saturating kernel store (--f16-store saturate) stores 65504 for both: no straddle there
  EXPECT_EQ(store_half_clamped(above), 0x7bff);
  EXPECT_EQ(store_half_clamped(below), 0x7bff);
  // stored, the straddle is one FP16 step: 2^16 (what rounding produced before the format ran
  // out of exponent) minus 65504 is 32, one FP16 ULP at 65504; the pre-store difference is
  // 2^-8 / 32 = 1.2e-4 of it. fp16-state's limit at 65504 (max_ulp 64 ULPs there) admits the
  // step with room; exact admits no step
  EXPECT_EQ(65536.0 - 65504.0, half_ulp_at(65504.0));
  const Tolerances d = Tolerances::defaults();
  EXPECT_GE(d.fp16_state.max_ulp, 1.0);
  Tensor ref = Tensor::zeros(DType::f16, {1, 1, 2}), got = ref;
  ref.f16()[0] = got.f16()[0] = float_to_half_rne(1.0f);
  ref.f16()[1] = float_to_half_rne(above);
  got.f16()[1] = float_to_half_rne(below);
  Where w;
  w.tensor = "h";
  const TensorReport r = compare_tensor(ref, got, TolClass::fp16_state, d, w);
  EXPECT_TRUE(r.pass) << r.text();
  EXPECT_EQ(r.overflow_boundary, 1);
  EXPECT_FALSE(compare_tensor(ref, got, TolClass::exact, d, w).pass);
}

}  // namespace
}  // namespace ssm::cmp
