// The region digest kernel (cuda/region_digest.cu) against a host evaluation of the same sum:
// every unit width (16-byte words, 2-byte units, bytes), an empty region, regions spread over
// several blocks, and more regions than one launch carries. Small enough to run under
// compute-sanitizer in seconds (the campaign test that also reaches this kernel is not).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/check.h"
#include "cuda/region_digest.h"
#include "cuda_test_support.h"

namespace ssm::test {
namespace {

class RegionDigestGpu : public GpuTest {};

uint64_t mix(uint64_t v, uint64_t index) {
  uint64_t z = v + index * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The digest region_digest.h specifies, from the bytes and the device address they live at.
uint64_t host_digest(const unsigned char* bytes, size_t n, uintptr_t device_address) {
  const uintptr_t align = device_address | n;
  uint64_t s = 0;
  auto load = [&](size_t at, int width) {
    uint64_t v = 0;
    for (int k = 0; k < width; ++k) v |= uint64_t(bytes[at + k]) << (8 * k);  // little-endian
    return v;
  };
  if (align % 16 == 0) {
    for (size_t i = 0; i < n / 16; ++i) s += mix(load(16 * i, 8), 2 * i) + mix(load(16 * i + 8, 8), 2 * i + 1);
  } else if (align % 2 == 0) {
    for (size_t i = 0; i < n / 2; ++i) s += mix(load(2 * i, 2), i);
  } else {
    for (size_t i = 0; i < n; ++i) s += mix(bytes[i], i);
  }
  return s;
}

struct DeviceBytes {
  explicit DeviceBytes(size_t n) { SSM_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), n)); }
  ~DeviceBytes() { cudaFree(p); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  unsigned char* p = nullptr;
};

std::vector<uint64_t> device_digests(const std::vector<cuda::DigestRegion>& regions) {
  unsigned long long* out = nullptr;
  SSM_CUDA(cudaMalloc(reinterpret_cast<void**>(&out), std::max<size_t>(regions.size(), 1) * sizeof(unsigned long long)));
  cuda::launch_region_digests(regions, out, nullptr);
  std::vector<uint64_t> h(regions.size());
  const cudaError_t e = cudaMemcpy(h.data(), out, h.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost);
  cudaFree(out);
  SSM_CUDA(e);
  return h;
}

TEST_F(RegionDigestGpu, EqualsTheHostSumForEveryUnitWidthAndBatch) {
  const uint64_t seed = 20261202;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const size_t total = 1 << 20;
  std::vector<unsigned char> host(total);
  for (auto& b : host) b = static_cast<unsigned char>(rng());
  DeviceBytes dev(total);
  SSM_CUDA(cudaMemcpy(dev.p, host.data(), total, cudaMemcpyHostToDevice));

  // {offset, bytes}: 16-byte units over many blocks (X = 64), 2-byte units, bytes (odd address,
  // odd size), empty, then 450 small regions of all three kinds (three launches of <= 200).
  std::vector<std::pair<size_t, size_t>> spans = {{0, 512 * 1024}, {512 * 1024 + 2, 70000}, {600001, 9999}, {700000, 0}};
  for (size_t i = 0; i < 450; ++i) spans.push_back({800000 + 400 * i + (i % 3 == 0 ? 0 : i % 3 == 1 ? 2 : 1), 16 * (i % 20) + (i % 3)});
  std::vector<cuda::DigestRegion> regions;
  for (auto [off, n] : spans) regions.push_back({dev.p + off, n});

  const std::vector<uint64_t> got = device_digests(regions);
  ASSERT_EQ(got.size(), spans.size());
  for (size_t i = 0; i < spans.size(); ++i)
    ASSERT_EQ(got[i], host_digest(host.data() + spans[i].first, spans[i].second, uintptr_t(dev.p) + spans[i].first))
        << "region " << i << " (offset " << spans[i].first << ", " << spans[i].second << " bytes)";
  EXPECT_EQ(got[3], 0u) << "the empty region";

  // One byte flipped inside region 1 changes its digest and no other.
  const size_t at = spans[1].first + 12345;
  const unsigned char flipped = static_cast<unsigned char>(host[at] ^ 0x10);
  SSM_CUDA(cudaMemcpy(dev.p + at, &flipped, 1, cudaMemcpyHostToDevice));
  const std::vector<uint64_t> again = device_digests(regions);
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i == 1)
      EXPECT_NE(again[i], got[i]);
    else
      ASSERT_EQ(again[i], got[i]) << "region " << i;
  }
}

}  // namespace
}  // namespace ssm::test
