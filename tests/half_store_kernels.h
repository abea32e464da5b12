// The CUDA kernels' FP16 state stores run on the device over a host array, for
// tests/half_store_gpu_test.cpp: store_half_clamped (one value) and store_half2_clamped (pairs)
// of cuda/common.cuh, each value's bits.
#pragma once
#include <cstdint>
#include <vector>

namespace ssm::test {

struct DeviceHalfStores {
  std::vector<uint16_t> one, pairs;  // per value: store_half_clamped's, store_half2_clamped's
};
// values.size() must be even (pairs).
DeviceHalfStores device_half_stores(const std::vector<float>& values);

}  // namespace ssm::test
