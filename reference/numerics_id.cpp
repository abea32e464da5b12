// ReferenceBackend::numerics_id: what determines the reference's numerics (core/backend.h).
#include <gnu/libc-version.h>

#include "reference/reference_backend.h"

namespace ssm::numerics {
// The digest of the reference's sources, core's and the headers they include, with the compiler,
// flags and Eigen version: generated at build time (cmake/numerics.cmake).
const char* reference();
}  // namespace ssm::numerics

namespace ssm::ref {

// What it runs on too: the C library's version (its libm, expf, log1pf, ..., is part of the
// arithmetic and is loaded at run time), the architecture (whether the compiler may contract a*b+c
// into one rounding) and, on x86-64, the CPU features by which glibc's libm picks its code at load
// time (its FMA and AVX2 variants), so the same executable never promises bits across machines that
// may compute otherwise.
std::string ReferenceBackend::numerics_id() const {
  std::string id = std::string("reference numerics:") + numerics::reference() + " glibc " + gnu_get_libc_version();
#if defined(__x86_64__)
  id += " x86-64";
  if (__builtin_cpu_supports("fma")) id += " fma";
  if (__builtin_cpu_supports("avx2")) id += " avx2";
#elif defined(__aarch64__)
  id += " aarch64";
#else
  id += " another architecture";
#endif
  return id;
}

}  // namespace ssm::ref
