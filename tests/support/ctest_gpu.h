// GPU tests under CTest's resource allocation (`ctest -j N --resource-spec-file F`, the spec from
// scripts/gpu-resource-spec): each gpu test declares RESOURCE_GROUPS gpus:1 (tests/CMakeLists.txt),
// CTest hands it one GPU id in CTEST_RESOURCE_GROUP_0_GPUS, and this static initializer narrows
// CUDA_VISIBLE_DEVICES to it before the CUDA runtime starts (before main), so every test of a
// multi-GPU host runs on its own device and child processes (ssmcheck, plug-ins) follow. Without
// resource allocation it does nothing. Included by tests/cuda_test_support.h.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "core/device_select.h"

namespace ssm::test {

inline const bool kCtestGpuSelected = [] {
  try {
    const auto id = ctest_allocated_gpu(std::getenv("CTEST_RESOURCE_GROUP_COUNT"),
                                        std::getenv("CTEST_RESOURCE_GROUP_0_GPUS"));
    if (!id) return false;
    setenv("CUDA_VISIBLE_DEVICES", id->c_str(), 1);
    std::fprintf(stderr, "ctest allocated GPU %s (CUDA_VISIBLE_DEVICES=%s)\n", id->c_str(), id->c_str());
    return true;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(2);
  }
}();

}  // namespace ssm::test
