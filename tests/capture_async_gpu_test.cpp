// Asynchronous capture of device pointers (capture/ssmcheck_capture.h, ABI minor 5) on a GPU: every
// array of a recorded trace is uploaded on the "engine's" stream right before its op is captured and
// overwritten there right after ssmc_end_op, so a copy that did not wait for the engine's event, or
// an engine stream that did not wait for the copies, would capture the wrong bytes; the trace must
// equal the recording bit for bit and replay with AGREE. Counterpart: capture_async_test.cpp (host).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/core.h>
#include <vector>

#include "capture/ssmcheck_capture.h"
#include "tests/cuda_test_support.h"
#include "tests/support/capture_abi.h"
#include "tests/support/trace_support.h"

namespace ssm::test {
namespace {

class CaptureAsyncGpu : public GpuTest {};

// The build's ssmcheck, or (a packed run on another machine, shared/tools/gpu-pack) $SSMCHECK or
// the one on PATH.
std::string ssmcheck_bin() {
  if (const char* env = std::getenv("SSMCHECK")) return env;
  return std::filesystem::exists(SSMCHECK_BIN) ? SSMCHECK_BIN : "ssmcheck";
}

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(x)

// dev (optional): ring = ssmc_set_device_staging's bytes (0: none); filled in: staged = the ops
// staged through the ring, with_arrays = the ops with device arrays.
struct Staging {
  int64_t ring = 0, staged = -1, with_arrays = -1;
};
void run_case(HMode mode, int64_t staging, int policy, const std::string& script, bool by_name = false,
              Staging* dev = nullptr) {
  const int64_t device_staging = dev ? dev->ring : 0;
  const Recorded r = record(case_of("tiny", mode, 11), script);
  std::printf("case: tiny %s, %zu ops, staging %lld bytes, device staging %lld bytes, policy %d: %s\n", to_string(mode),
              r.ops.size(), (long long)staging, (long long)device_staging, policy, script.c_str());
  TempDir d;
  const std::string path = d.file("gpu_async.h5");
  ssmc_trace* t = open_for(r, path, by_name);
  ASSERT_NE(t, nullptr) << ssmc_last_error();
  ASSERT_EQ(ssmc_device_support(), 1);
  ASSERT_EQ(ssmc_set_async(t, staging, policy), SSMC_OK) << ssmc_last_error();
  if (device_staging) {
    ASSERT_EQ(ssmc_set_device_staging(t, device_staging), SSMC_OK) << ssmc_last_error();
  }
  int64_t arrays_ops = 0;
  cudaStream_t engine = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&engine, cudaStreamNonBlocking));
  // a slow kernel-free delay: a large device-to-device copy queued before each upload, so the
  // uploads (and the data) land well after ssmc_op_* return
  const size_t big = size_t(256) << 20;
  void *x = nullptr, *y = nullptr;
  CUDA_OK(cudaMalloc(&x, big));
  CUDA_OK(cudaMalloc(&y, big));
  std::vector<void*> arrays;
  std::vector<std::vector<char>> pinned_src;  // host sources kept alive until the uploads ran
  for (size_t i = 0; i < r.ops.size(); ++i) {
    std::vector<std::pair<void*, size_t>> op_arrays;
    CUDA_OK(cudaMemcpyAsync(y, x, big, cudaMemcpyDeviceToDevice, engine));
    const ToMemory to_device = [&](const void* host, size_t bytes) -> const void* {
      void* p = nullptr;
      if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
      pinned_src.emplace_back(static_cast<const char*>(host), static_cast<const char*>(host) + bytes);
      cudaMemcpyAsync(p, pinned_src.back().data(), bytes, cudaMemcpyHostToDevice, engine);
      arrays.push_back(p);
      op_arrays.emplace_back(p, bytes);
      return p;
    };
    ASSERT_EQ(capture_op(t, r.header.model.spec, r.ops[i], SSMC_DEVICE, to_device, engine, by_name), SSMC_OK)
        << "op " << i << ": " << ssmc_last_error();
    for (const auto& [p, bytes] : op_arrays) CUDA_OK(cudaMemsetAsync(p, 0xff, bytes, engine));  // the engine goes on
    arrays_ops += op_arrays.empty() ? 0 : 1;
  }
  const int64_t staged = ssmc_device_staged(t);
  if (dev) {
    dev->staged = staged;
    dev->with_arrays = arrays_ops;
  }
  std::printf("ops with device arrays: %lld, staged through the device ring: %lld\n", (long long)arrays_ops,
              (long long)staged);
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  CUDA_OK(cudaStreamSynchronize(engine));
  for (void* p : arrays) cudaFree(p);
  cudaFree(x);
  cudaFree(y);
  cudaStreamDestroy(engine);

  const formats::Trace got = formats::read_trace(path);
  ASSERT_EQ(got.ops.size(), r.ops.size());
  size_t compared = 0;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    SCOPED_TRACE(fmt::format("op {} '{}'", i, to_string(r.ops[i].op)));
    const formats::TraceOp& a = r.ops[i];
    const formats::TraceOp& b = got.ops[i];
    EXPECT_FALSE(b.states_dropped);
    for (size_t e = 0; e < a.inputs.size(); ++e)
      for (size_t l = 0; l < a.inputs[e].layers.size(); ++l) {
        EXPECT_EQ(a.inputs[e].layers[l].conv_in, b.inputs[e].layers[l].conv_in);
        EXPECT_EQ(a.inputs[e].layers[l].gate_in, b.inputs[e].layers[l].gate_in);
        compared += a.inputs[e].layers[l].conv_in.size();
      }
    ASSERT_EQ(a.states.size(), b.states.size());
    for (size_t s = 0; s < a.states.size(); ++s)
      for (size_t l = 0; l < a.states[s].state.layers.size(); ++l) {
        const LayerState& p = a.states[s].state.layers[l];
        const LayerState& q = b.states[s].state.layers[l];
        ASSERT_EQ(p.h.bytes(), q.h.bytes());
        EXPECT_EQ(std::memcmp(p.h.raw(), q.h.raw(), p.h.bytes()), 0);
        EXPECT_EQ(std::memcmp(p.conv.raw(), q.conv.raw(), p.conv.bytes()), 0);
        ASSERT_EQ(p.h_intermediates.size(), q.h_intermediates.size());
        for (size_t k = 0; k < p.h_intermediates.size(); ++k)
          EXPECT_EQ(std::memcmp(p.h_intermediates[k].raw(), q.h_intermediates[k].raw(), p.h_intermediates[k].bytes()),
                    0);
        compared += size_t(p.h.size());
      }
  }
  EXPECT_GT(compared, 0u) << "nothing compared";
  const Shell rep = sh(ssmcheck_bin() + " replay " + q(path));
  std::printf("%s", rep.out.c_str());
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find(fmt::format("AGREE: {} ops", r.ops.size())), std::string::npos) << rep.out;
}

const char* kScript =
    "alloc; prefill 5; checkpoint; alloc @1; decode @0,1; verify 4 @1,0; commit 2 4 @1; commit 3 4 @0; decode @1,pad,0";

TEST_F(CaptureAsyncGpu, DeviceArraysCapturedAsynchronouslyReplayBitForBit) {
  run_case(HMode::f32, 0, SSMC_BLOCK, kScript);
}

TEST_F(CaptureAsyncGpu, F16StateThroughASmallPoolUnderBlockReplaysBitForBit) {
  run_case(HMode::f16, 256 << 10, SSMC_BLOCK, kScript);
}

// ABI minor 6: layers, weights, inputs and outputs by name, the device arrays staged as above
TEST_F(CaptureAsyncGpu, DeviceArraysCapturedByNameReplayBitForBit) {
  run_case(HMode::f32, 0, SSMC_BLOCK, kScript, true);
}

// ABI minor 7: with device staging every op's device arrays go through the ring (the engine's stream
// waits for the copy into it only), and the trace is the same bit for bit.
TEST_F(CaptureAsyncGpu, DeviceStagedArraysReplayBitForBit) {
  Staging dev{int64_t(64) << 20};
  run_case(HMode::f32, 0, SSMC_BLOCK, kScript, false, &dev);
  EXPECT_GT(dev.with_arrays, 0);
  EXPECT_EQ(dev.staged, dev.with_arrays) << "a 64 MiB ring holds every op of tiny";
}

// A ring of a few ops, reused many times over: each copy into it waits on the device for the
// device-to-host copy of the range it reuses (a copy that did not would capture the next op's bytes);
// ops larger than the ring go the direct way. Either way the trace is the same bit for bit.
TEST_F(CaptureAsyncGpu, ASmallDeviceRingReusedManyTimesReplaysBitForBit) {
  std::string script = "alloc; prefill 5; alloc @1; prefill 3 @1";
  for (int i = 0; i < 24; ++i) script += i % 3 == 2 ? "; verify 3 @0,1; commit 1 3 @0; commit 2 3 @1" : "; decode @1,0";
  Staging dev{16 << 10};
  run_case(HMode::f16, 0, SSMC_BLOCK, script, false, &dev);
  EXPECT_GT(dev.staged, 8) << "the ring held too few ops to be reused";
  EXPECT_LE(dev.staged, dev.with_arrays);
}

}  // namespace
}  // namespace ssm::test
