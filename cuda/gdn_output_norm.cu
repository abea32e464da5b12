// Output norm of STATE-MODEL section 3 step 4, per (row, value head):
// out = o * 1/sqrt(mean(o^2) + eps) * norm_w * gate(z), gate = silu or sigmoid.
// Types: FP32. Shapes: o, z, out [rows][nv][vd]; norm_w [vd].
// Launch: grid (nv, rows), block roundup(vd, 32) threads, thread = column; mean(o^2) is a
//   deterministic block sum, so every row's output is the same bits whatever launch produced o.
// Launched as a programmatic dependent of the row kernel (cuda/dependent_launch.cuh).
// Counterpart: reference/gdn_output_norm.cpp.
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/gdn_output_norm.h"

namespace ssm::cuda {

namespace {
__global__ void gdn_output_norm_kernel(NormParams p) {
  __shared__ float red[32];
  const int vh = blockIdx.x, j = threadIdx.x;
  const size_t base = size_t(blockIdx.y) * p.nv * p.vd + size_t(vh) * p.vd;
  // the gate input and the weight first: no kernel writes them (z is staged before the op's kernels)
  const float z = j < p.vd ? p.z[base + j] : 0.0f;
  const float w = j < p.vd ? p.norm_w[j] : 0.0f;
  wait_for_previous();  // o from the row kernel (launched as its programmatic dependent)
  const float o = j < p.vd ? p.o[base + j] : 0.0f;
  float ss[1] = {__fmul_rn(o, o)};
  block_sum<1>(ss, red);
  if (j >= p.vd) return;
  const float rn = __fdiv_rn(1.0f, sqrtf(__fadd_rn(__fdiv_rn(ss[0], float(p.vd)), p.eps)));
  const float gate = p.sigmoid_gate ? sigmoid_f(z) : __fmul_rn(z, sigmoid_f(z));
  p.out[base + j] = __fmul_rn(__fmul_rn(__fmul_rn(o, rn), w), gate);
}
}  // namespace

void launch_gdn_output_norm(const NormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  const int threads = (p.vd + 31) / 32 * 32;
  launch_dependent("gdn_output_norm_kernel", &gdn_output_norm_kernel, dim3(unsigned(p.nv), unsigned(p.rows)),
                   dim3(unsigned(threads)), 0, stream, p);
}

}  // namespace ssm::cuda
