// The allocation families of the device pool (one allocation per layer and family): one list for
// the pool (cuda/pool.h) and the CudaBackend test hooks (cuda/cuda_backend.h). Plain C++.
#pragma once

namespace ssm::cuda {

enum class PoolFamily {
  h, conv, h_checkpoint, conv_checkpoint, h_intermediates, conv_intermediates,
  snapshot_h, snapshot_conv, stage
};

}  // namespace ssm::cuda
