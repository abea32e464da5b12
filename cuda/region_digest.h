// Digests of device regions (cuda/region_digest.cu), for CudaBackend::state_digest: a sequence
// whose digests did not change since it last passed is neither read back nor compared
// (fuzz/lockstep.cpp), so an op pays the device-to-host traffic of the sequences it touched only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace ssm::cuda {

struct DigestRegion {
  const void* src;  // device
  size_t bytes;
};

// out[i] (device, n = regions.size() values, overwritten) = the digest of region i: the sum mod
// 2^64 of mix(unit value, unit index) over its units (16-byte words as two 64-bit halves when
// the region is 16-byte aligned in address and size, else 2-byte units when 2-byte aligned, else
// bytes), mix being the splitmix64 finaliser. Integer sums do not depend on the order the
// threads add them in, so a region's digest is the same on every run; a change of the region's
// bytes leaves it unchanged with probability about 2^-64. The unit depends on the address, so a digest is
// only comparable with earlier digests of the same region (a pool slot's regions never move).
void launch_region_digests(const std::vector<DigestRegion>& regions, unsigned long long* out, cudaStream_t stream);

}  // namespace ssm::cuda
