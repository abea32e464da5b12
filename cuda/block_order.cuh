// Block order under schedule perturbation (cuda/schedule.h), device and launch side. A kernel that
// may run perturbed has a template flag ORDERED and takes a BlockOrder in its parameters; it asks
// logical_block<ORDERED>() which block it is instead of reading blockIdx, and logical_grid() how many
// there are instead of gridDim. The shipped instance (ORDERED false) reads blockIdx and gridDim
// themselves: the ordering code is compiled out of it, so the hooks cost the shipped path nothing
// (docs/cuda.md, "Perturbed schedules"). launch_ordered() launches the shipped instance as written,
// or, when the engine enqueueing on this thread perturbs its schedule, the ORDERED instance as the
// seeded permutation in 2 to 4 sequential waves.
#pragma once
#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/schedule.h"

namespace ssm::cuda {

// The logical block this block runs: (x, y) of the logical grid (an ORDERED instance launched
// plainly, n == 0, runs as written).
template <bool ORDERED>
__device__ __forceinline__ uint2 logical_block(const BlockOrder& o) {
  if (!ORDERED || o.n == 0) return make_uint2(blockIdx.x, blockIdx.y);
  const unsigned i = o.first + blockIdx.x;
  const unsigned l = unsigned((unsigned long long)o.mul * i % o.n + o.add) % o.n;
  return make_uint2(l % o.gx, l / o.gx);
}
template <bool ORDERED>
__device__ __forceinline__ uint2 logical_grid(const BlockOrder& o) {
  return !ORDERED || o.n == 0 ? make_uint2(gridDim.x, gridDim.y) : make_uint2(o.gx, o.gy);
}
// A work item's index under the order of a persistent kernel (n == 0 or i beyond n: i itself).
template <bool ORDERED>
__device__ __forceinline__ int logical_item(const BlockOrder& o, int i) {
  if (!ORDERED || o.n == 0 || unsigned(i) >= o.n) return i;
  return int(unsigned((unsigned long long)o.mul * unsigned(i) % o.n + o.add) % o.n);
}

// A kernel's two instances: `shipped` (ORDERED false) and `ordered` (ORDERED true).
template <typename Params>
struct OrderedKernel {
  void (*shipped)(Params);
  void (*ordered)(Params);
};

// Launches k.shipped(p) on a grid (x, y) of `block` threads: as written (a programmatic dependent
// of the kernel before it when `dependent`), or, under a perturbed schedule, k.ordered(p) with
// p.*order set for each wave of the plan, each wave launched as the whole launch would be. A dependent wave is a programmatic
// dependent of the wave before it: what it does after its grid-dependency wait runs after that wave
// has ended (the waves stay sequential), and what it may do before the wait overlaps it as the
// whole launch would overlap the kernel before it. Plain waves would wait for every earlier kernel
// to end and so hide a read that races one of them (mutant cuda_conv_races_widen).
template <typename Params>
void launch_ordered(const char* name, OrderedKernel<Params> k, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    bool dependent, Params p, BlockOrder Params::*order) {
  Schedule* s = current_schedule();
  if (!s || grid.z != 1) {
    if (dependent) return launch_dependent(name, k.shipped, grid, block, smem, stream, p);
    k.shipped<<<grid, block, smem, stream>>>(p);
    return cuda_check(cudaGetLastError(), name, __FILE__, __LINE__);
  }
  const unsigned n = grid.x * grid.y;
  const Schedule::Plan plan = s->next(n);
  for (size_t w = 0; w + 1 < plan.cuts.size(); ++w) {
    p.*order = BlockOrder{n, grid.x, grid.y, plan.cuts[w], plan.mul, plan.add};
    const dim3 wave(plan.cuts[w + 1] - plan.cuts[w]);
    if (dependent) {
      launch_dependent(name, k.ordered, wave, block, smem, stream, p);
    } else {
      k.ordered<<<wave, block, smem, stream>>>(p);
      cuda_check(cudaGetLastError(), name, __FILE__, __LINE__);
    }
  }
}

}  // namespace ssm::cuda
