// ssmcheck's CUDA implementation as a plug-in: libssmcheck_cuda_plugin.so (built with CUDA), through
// backend_plugin.cpp's adapter. The GPU suite and the gate run it through the C ABI as well as
// directly: the proof that the ABI carries everything a real GPU implementation needs (its own
// legality, FP16 h, the f16-pool stage, async copies held by pause_async_copies). Judged under
// the tolerance classes, like `--backend cuda`. No options.
#include <stdexcept>

#include "cuda/cuda_backend.h"
#include "plugin/backend_plugin.h"

namespace {

std::unique_ptr<ssm::Backend> make(const std::string& options) {
  if (!options.empty()) throw std::invalid_argument("unknown options '" + options + "' (this plug-in takes none)");
  std::string why;
  if (!ssm::cuda::device_available(&why)) throw std::runtime_error("no usable GPU: " + why);
  return std::make_unique<ssm::cuda::CudaBackend>();
}

}  // namespace

extern "C" SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  static const ssmp_plugin* table =
      ssm::plugin::expose({"ssmcheck CUDA (as a plug-in)", SSMP_OWN_LEGALITY | SSMP_MAMBA2 | SSMP_PLE, make,
                           /*async_copies=*/true, /*capabilities=*/nullptr, /*perturbable=*/true,
                           /*field_digests=*/true});
  return table;
}
