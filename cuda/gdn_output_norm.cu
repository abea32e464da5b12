// Output norm of STATE-MODEL section 3 step 4, per (row, value head):
// out = o * 1/sqrt(mean(o^2) + eps) * norm_w * gate(z), gate = silu or sigmoid.
// Types: FP32. Shapes: o, z, out [rows][nv][vd]; norm_w [vd].
// Launch: grid (nv, rows), block roundup(vd, 32) threads, thread = column; mean(o^2) is a
//   deterministic block sum, so every row's output is the same bits whatever launch produced o.
// Launched as a programmatic dependent of the row kernel (cuda/dependent_launch.cuh); for a few
// rows it lets the kernel after it (the next layer's conv kernel, which reads its weights and then
// waits for this one) launch once it has waited for the row kernel (kEarlyNextRows).
// Counterpart: reference/gdn_output_norm.cpp.
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/gdn_output_norm.h"

namespace ssm::cuda {

namespace {
// Rows up to which the next kernel launches early. Measured on the H200 (qwen3-next-80b, 36
// layers, Dec 2), always early against never: decode 4-9% faster up to B = 16 (B = 1: 6.95 ->
// 6.45 us per layer, FP16 6.34 -> 5.86), verify K=4 3-5% up to B = 4 (16 rows); from 32 rows on
// 0.2-1.3% slower (verify K=4 at B >= 8, decode at B = 32): the early CTAs of the next kernel
// take SM slots that the norm's own later CTAs need. With this bound (next call): the same gains,
// and from 32 rows within 0.2% of never.
constexpr int kEarlyNextRows = 16;

__global__ void gdn_output_norm_kernel(NormParams p) {
  __shared__ float red[32];
  const int vh = blockIdx.x, j = threadIdx.x;
  const size_t base = size_t(blockIdx.y) * p.nv * p.vd + size_t(vh) * p.vd;
  // the gate input and the weight first: no kernel writes them (z is staged before the op's kernels)
  const float z = j < p.vd ? p.z[base + j] : 0.0f;
  const float w = j < p.vd ? p.norm_w[j] : 0.0f;
  wait_for_previous();  // o from the row kernel (launched as its programmatic dependent)
  if (p.next_early) allow_dependents();  // the next layer's conv kernel may launch (kEarlyNextRows)
  const float o = j < p.vd ? p.o[base + j] : 0.0f;
  float ss[1] = {__fmul_rn(o, o)};
  block_sum<1>(ss, red);
  if (j >= p.vd) return;
  const float rn = __fdiv_rn(1.0f, sqrtf(__fadd_rn(__fdiv_rn(ss[0], float(p.vd)), p.eps)));
  const float gate = p.sigmoid_gate ? sigmoid_f(z) : __fmul_rn(z, sigmoid_f(z));
  p.out[base + j] = __fmul_rn(__fmul_rn(__fmul_rn(o, rn), w), gate);
}
}  // namespace

void launch_gdn_output_norm(const NormParams& params, cudaStream_t stream) {
  if (params.rows == 0) return;
  NormParams p = params;
  p.next_early = p.rows <= kEarlyNextRows;
  const int threads = (p.vd + 31) / 32 * 32;
  launch_dependent("gdn_output_norm_kernel", &gdn_output_norm_kernel, dim3(unsigned(p.nv), unsigned(p.rows)),
                   dim3(unsigned(threads)), 0, stream, p);
}

}  // namespace ssm::cuda
