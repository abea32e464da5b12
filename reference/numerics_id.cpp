// ReferenceBackend::numerics_id: what determines the reference's numerics (core/backend.h).
#include <gnu/libc-version.h>

#include "reference/reference_backend.h"

namespace ssm::numerics {
// The digest of the reference's sources, core's and the headers they include, with the compiler,
// flags and Eigen version: generated at build time (cmake/numerics.cmake).
const char* reference();
}  // namespace ssm::numerics

namespace ssm::ref {

// The C library's version too: its libm (expf, log1pf, ...) is part of the arithmetic and is
// loaded at run time, so the same executable may compute otherwise on another system.
std::string ReferenceBackend::numerics_id() const {
  return std::string("reference numerics:") + numerics::reference() + " glibc " + gnu_get_libc_version();
}

}  // namespace ssm::ref
