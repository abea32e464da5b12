// Host-side copies on several threads (see host_copies.h).
#include "core/host_copies.h"

#include <exception>

namespace ssm {

void run_host_copies(int n, size_t bytes, const std::function<void(int)>& task) {
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic) if (bytes >= kParallelHostBytes)
  for (int i = 0; i < n; ++i) {
    try {
      task(i);
    } catch (...) {
#pragma omp critical(ssm_host_copies_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace ssm
