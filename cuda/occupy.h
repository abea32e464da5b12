// Test hook (cuda/occupy.cu): keeps every SM of the device busy for a while, as another process
// sharing the GPU would, so that work needing an SM waits while the copy engines go on. The
// regression test of DeviceBuffer's zeroing uses it (tests/cuda_pool_gpu_test.cpp).
#pragma once
#include <cuda_runtime_api.h>

namespace ssm::cuda {

// Launches on `stream` enough resident blocks to fill every SM, each spinning for `milliseconds`
// (on the global timer) before it exits.
void launch_occupy_sms(cudaStream_t stream, int milliseconds);

}  // namespace ssm::cuda
