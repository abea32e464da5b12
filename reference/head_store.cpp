// reference/head_store.h
#include "reference/head_store.h"

#include <atomic>
#include <cmath>

#include "core/half.h"
#include "core/half_widen.h"
#include "reference/branches.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SSM_F16C_PATH 1
#endif

namespace ssm::ref {

// MatD is row-major, so a head's element (i, j) sits at i * cols + j both in the matrix and in
// the tensor: the loops run over the flat block, with the dtype decided once per head (these two
// functions run for every head of every row of every op; the FP16 ones were a third of a
// campaign's time on the odd presets).
//
// FP16 on x86: the F16C instructions convert in one step what core/half.h does with branches, and
// give the same values. Narrowing (IEEE round to nearest even, subnormal halves, the immediate
// rounding mode rather than MXCSR's) equals float_to_half_rne for every float within +-65504,
// where a kernel store of either kind (F16Store) is a plain conversion: all 2,399,125,506 of them
// checked once (Dec 1 2026); everything else (NaN, beyond the range: the counted branches) takes
// the portable store_half / store_half_inf. Widening equals half_to_float for every half but the
// 1022 signalling NaNs, which F16C quiets; as doubles (what a head is) those agree too, since
// float -> double quiets them anyway. The F16C path converts 8 halves (widening: core/half_widen.h
// widen_halves, which the comparison uses too) or 4 values (storing) per instruction, the same
// conversions lane by lane (it was a seventh of a reference-against-reference campaign's time one
// at a time). tests/head_store_test.cpp compares
// both paths on every half, on the rounding boundaries between neighbouring halves, on a million
// random floats and on every length and offset of a short head.

namespace {

#ifdef SSM_F16C_PATH
// One element: the conversion below for |f| <= 65504, else the counted portable stores.
__attribute__((target("avx,f16c"))) inline void store_one_f16c(F16Store store, double in, uint16_t* to,
                                                                double* out) {
  const float f = float(in);
  if (std::fabs(f) <= 65504.0f) *to = _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
  else *to = store == F16Store::saturate ? store_half(f) : store_half_inf(f);  // NaN, beyond the range
  *out = _cvtsh_ss(*to);
}

// 4 at a time where all 4 narrowed floats are within +-65504 (the double -> float conversion is
// cvtpd2ps, float(in) lane by lane under the same MXCSR rounding); a group with a NaN or a value
// beyond the range, and the tail, one at a time (store_one_f16c), so the counted branches count
// the same elements.
__attribute__((target("avx,f16c"))) void store_f16c(F16Store store, const double* in, uint16_t* to, double* out,
                                                     int64_t n) {
  const __m128 sign = _mm_set1_ps(-0.0f), limit = _mm_set1_ps(65504.0f);
  int64_t e = 0;
  for (; e + 4 <= n; e += 4) {
    const __m128 f = _mm256_cvtpd_ps(_mm256_loadu_pd(in + e));
    if (_mm_movemask_ps(_mm_cmp_ps(_mm_andnot_ps(sign, f), limit, _CMP_LE_OQ)) != 0xf) {
      for (int64_t k = e; k < e + 4; ++k) store_one_f16c(store, in[k], to + k, out + k);
      continue;
    }
    const __m128i h = _mm_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(to + e), h);
    _mm256_storeu_pd(out + e, _mm256_cvtps_pd(_mm_cvtph_ps(h)));
  }
  for (; e < n; ++e) store_one_f16c(store, in[e], to + e, out + e);
}
#else
void store_f16c(F16Store, const double*, uint16_t*, double*, int64_t) {}
#endif

std::atomic<bool> g_f16c_enabled{true};

bool use_f16c() { return g_f16c_enabled.load(std::memory_order_relaxed) && cpu_has_f16c(); }

}  // namespace

namespace detail {
bool set_f16c_path(bool on) {
  g_f16c_enabled = on;
  return cpu_has_f16c();
}
}  // namespace detail

MatD load_head(const Tensor& h, int64_t base, int rows, int cols) {
  MatD H(rows, cols);
  double* out = H.data();
  const int64_t n = int64_t(rows) * cols;
  if (h.dtype() == DType::f32) {
    const float* in = h.f32() + base;
    for (int64_t e = 0; e < n; ++e) out[e] = in[e];
  } else if (use_f16c()) {
    widen_halves(h.f16() + base, out, n);  // F16C (core/half_widen.h)
  } else {
    const uint16_t* in = h.f16() + base;
    for (int64_t e = 0; e < n; ++e) out[e] = half_to_float(in[e]);
  }
  return H;
}

MatD store_head(F16Store store, Tensor& h, int64_t base, const MatD& H) {
  MatD stored(H.rows(), H.cols());
  const double* in = H.data();
  double* out = stored.data();
  const int64_t n = H.size();
  if (h.dtype() == DType::f32) {
    float* to = h.f32() + base;
    for (int64_t e = 0; e < n; ++e) {
      const float f = float(in[e]);
      to[e] = f;
      out[e] = f;
    }
  } else if (use_f16c()) {
    store_f16c(store, in, h.f16() + base, out, n);
  } else {
    uint16_t* to = h.f16() + base;
    for (int64_t e = 0; e < n; ++e) {
      const float f = float(in[e]);
      to[e] = store == F16Store::saturate ? store_half(f) : store_half_inf(f);
      out[e] = half_to_float(to[e]);
    }
  }
  return stored;
}

}  // namespace ssm::ref
