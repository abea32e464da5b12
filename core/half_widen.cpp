// core/half_widen.h
#include "core/half_widen.h"

#include "core/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SSM_F16C_PATH 1
#endif

namespace ssm {

bool cpu_has_f16c() {
#ifdef SSM_F16C_PATH
  static const bool yes = [] {
    __builtin_cpu_init();  // a static initialiser may run before libgcc's own
    // F16C from CPUID leaf 1 (clang's __builtin_cpu_supports has no "f16c"); AVX's check also
    // covers the OS saving the registers
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return yes;
#else
  return false;
#endif
}

namespace {
#ifdef SSM_F16C_PATH
// 8 halves per vcvtph2ps, the tail one at a time (the same conversion)
__attribute__((target("avx,f16c"))) void widen_f16c(const uint16_t* in, float* out, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k))));
  for (; k < n; ++k) out[k] = _cvtsh_ss(in[k]);
}
__attribute__((target("avx,f16c"))) void widen_f16c(const uint16_t* in, double* out, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k)));
    _mm256_storeu_pd(out + k, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    _mm256_storeu_pd(out + k + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  }
  for (; k < n; ++k) out[k] = _cvtsh_ss(in[k]);
}
#endif

template <class T>
void widen(const uint16_t* in, T* out, int64_t n) {
#ifdef SSM_F16C_PATH
  if (cpu_has_f16c()) return widen_f16c(in, out, n);
#endif
  for (int64_t k = 0; k < n; ++k) out[k] = half_to_float(in[k]);
}
}  // namespace

void widen_halves(const uint16_t* in, float* out, int64_t n) { widen(in, out, n); }
void widen_halves(const uint16_t* in, double* out, int64_t n) { widen(in, out, n); }

}  // namespace ssm
