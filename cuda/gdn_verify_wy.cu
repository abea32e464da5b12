// Verify(K), multi-row (WY) arm: reads H0 once, forms every row's correction algebraically
// from H0 and the previous rows' dot products, then writes K-1 intermediates and the final state.
// Types: h FP32 or FP16 (HT), everything else FP32; FP32 arithmetic.
// Math: with Gp_t = prod_{r<t} g_r and a_{s,t} = prod_{s<r<t} g_r,
//   H_{t-1}^T k_t = Gp_t H0^T k_t + sum_{s<t} a_{s,t} (k_s . k_t) vn_s,
//   vn_t = (v_t - g_t H_{t-1}^T k_t) beta_t,
// so one sweep over H0 gives H0^T k_t for every t (one barrier instead of one per row), the
// K x K Gram matrix k_s . k_t comes from shared memory, and each thread then solves the
// recursion for its own columns. The states themselves are formed row by row in registers,
// H_t = g_t H_{t-1} + k_t vn_t^T; the FP16 twin rounds each H_t (clamped store) before it is
// carried, stored as an intermediate and read by the output. Tolerance-equal to the exact arm
// (cuda/gdn_decode.cu), not bitwise: vn_t comes from the expansion, not from the rounded H_{t-1}.
// When an FP16 store clamps (a saturated state), the block redoes the rows exactly (bitwise equal
// to the exact arm): the clamp is not a rounding the tolerance covers.
// Shapes: as cuda/gdn_rows.h. Launch: grid (ntiles * nv, B), block = rows_layout with at most
//   256 threads (the K rows of vn add KMAX*VEC registers per thread), same register layout as
//   the row kernel and its sums over rows (gdn_rows_threads.cuh); dynamic shared memory: KMAX
//   partial arrays, K rows of q, k and the tile's v, g and beta, the Gram matrix. Five barriers
//   in all, against three per row in the exact arm (plus two per row on the rare redo).
//   Launched as a programmatic dependent of the conv kernel, which it waits for first thing.
// Counterpart: reference/verify.cpp (both arms share it).
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/block_order.cuh"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/gdn_rows_threads.cuh"
#include "cuda/gdn_verify_wy.h"

namespace ssm::cuda {

namespace {

template <typename HT, int VEC, int KMAX, bool ORDERED>
__global__ void __launch_bounds__(256, VEC == 4 && KMAX <= 4 ? 2 : 1) gdn_verify_wy_kernel(RowsParams p) {
  constexpr int RPT = 32 / VEC;
  wait_for_previous();  // a programmatic dependent (cuda/dependent_launch.cuh): everything before is written
  allow_dependents();   // the next kernel may launch; it waits for this one's end
  extern __shared__ float smem[];
  const int kd = p.kd, vd = p.vd, TJ = p.tj, K = p.R;
  const int part_sz = p.ty_groups * p.tx_pad * VEC;
  float* part = smem;                 // [KMAX][ty_groups][tx_pad * VEC] (rows_sum_publish)
  float* sq = part + KMAX * part_sz;  // [KMAX][kd]
  float* sk = sq + KMAX * kd;         // [KMAX][kd]
  float* sv = sk + KMAX * kd;         // [KMAX][TJ]
  float* sgb = sv + KMAX * TJ;        // [KMAX][2]
  float* kk = sgb + 2 * KMAX;         // [KMAX][KMAX], s < t

  const uint2 lb = logical_block<ORDERED>(p.order);
  const int vh = int(lb.x) / p.ntiles, tile = int(lb.x) % p.ntiles, b = int(lb.y);
  const int kh = vh / (p.nv / p.nk);
  const int slot = p.slots[b];
  const int tid = threadIdx.x;
  const RowsThread th = rows_thread(p);
  const int tx = th.tx, ty = th.ty;
  const int jt = tile * TJ, jl = tx * VEC;
  const bool owner = ty < p.ty_n && tx < p.tx_n && jt + jl < vd;
  const int conv_dim = 2 * p.nk * kd + p.nv * vd;
  const size_t head = size_t(vh) * kd * vd + jt + jl;

  HT* hlive = reinterpret_cast<HT*>(p.h + size_t(slot) * p.h_pitch) + head;
  float H[RPT][VEC];
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = ty * RPT + r;
    if (owner && i < kd) load_vec<VEC>(hlive + size_t(i) * vd, H[r]);
    else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) H[r][e] = 0.0f;
    }
  }

  for (int t = 0; t < K; ++t) {
    const size_t row = size_t(b) * K + t;
    const float* y = p.qkv + row * conv_dim;
    for (int c = tid; c < kd; c += blockDim.x) {
      sq[t * kd + c] = y[kh * kd + c];
      sk[t * kd + c] = y[(p.nk + kh) * kd + c];
    }
    for (int c = tid; c < TJ && jt + c < vd; c += blockDim.x) sv[t * TJ + c] = y[2 * p.nk * kd + vh * vd + jt + c];
    if (tid < 2) sgb[2 * t + tid] = p.gb[(row * p.nv + vh) * 2 + tid];
  }
  __syncthreads();

  {  // Gram matrix k_s . k_t, one warp per pair, butterfly sum (fixed order)
    const int lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    int pair = 0;
    for (int t = 1; t < K; ++t)
      for (int s = 0; s < t; ++s, ++pair) {
        if (pair % nw != warp) continue;
        float acc = 0.0f;
        for (int i = lane; i < kd; i += 32) acc = __fmaf_rn(sk[s * kd + i], sk[t * kd + i], acc);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
        if (lane == 0) kk[s * KMAX + t] = acc;
      }
  }
  __syncthreads();

  // H0^T k_t for every t over this thread's rows: the one sweep over H0, each sum published
  // (rows_sum_publish: every lane, the shuffles) and collected after one barrier.
#pragma unroll
  for (int t = 0; t < KMAX; ++t) {
    if (t < K) {
      float pk[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) pk[e] = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = ty * RPT + r;
        if (i < kd) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) pk[e] = __fmaf_rn(H[r][e], sk[t * kd + i], pk[e]);
        }
      }
      rows_sum_publish<VEC>(pk, p, th, part + t * part_sz);
    }
  }
  __syncthreads();

  float vn[KMAX][VEC];  // the recursion for this thread's columns; zero off the owned columns
  {
    float a[KMAX];
    float gp = 1.0f;
#pragma unroll
    for (int t = 0; t < KMAX; ++t) {
      a[t] = 1.0f;
      if (t < K) {
        const float g = sgb[2 * t], beta = sgb[2 * t + 1];
        float c[VEC];
        rows_sum_collect<VEC>(c, p, th, part + t * part_sz);
#pragma unroll
        for (int e = 0; e < VEC; ++e) c[e] = __fmul_rn(gp, c[e]);
#pragma unroll
        for (int s = 0; s < KMAX; ++s) {
          if (s < t) {
            const float coef = __fmul_rn(a[s], kk[s * KMAX + t]);
#pragma unroll
            for (int e = 0; e < VEC; ++e) c[e] = __fmaf_rn(coef, vn[s][e], c[e]);
          }
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          vn[t][e] = owner ? __fmul_rn(__fsub_rn(sv[t * TJ + jl + e], __fmul_rn(g, c[e])), beta) : 0.0f;
#pragma unroll
        for (int s = 0; s < KMAX; ++s)
          if (s < t) a[s] = __fmul_rn(a[s], g);
        gp = __fmul_rn(gp, g);
      }
    }
  }
  __syncthreads();  // part is reused for the output partials

  auto inter_of = [&](int t) -> HT* {
    return t < p.n_inter ? reinterpret_cast<HT*>(p.h_inter + size_t(p.inter_first[slot] + t) * p.h_pitch) + head
                         : nullptr;
  };
  bool saturated = false;  // FP16: a state element stored clamped (beyond +-65504, or NaN)
#pragma unroll
  for (int t = 0; t < KMAX; ++t) {  // the states, row by row in registers, and the output partials
    if (t < K) {
      const float g = sgb[2 * t];
      HT* inter = inter_of(t);
      float po[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) po[e] = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = ty * RPT + r;
        if (i < kd) {
          const float ki = sk[t * kd + i], qi = sq[t * kd + i];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            const float pre = __fmaf_rn(ki, vn[t][e], __fmul_rn(g, H[r][e]));
            if constexpr (!std::is_same<HT, float>::value) saturated = saturated || !(fabsf(pre) <= 65504.0f);
            H[r][e] = HStore<HT>::round(pre);
            po[e] = __fmaf_rn(H[r][e], qi, po[e]);
          }
          if (inter && owner) store_vec<VEC>(inter + size_t(i) * vd, H[r]);
        }
      }
      rows_sum_publish<VEC>(po, p, th, part + t * part_sz);
    }
  }
  // A clamped FP16 store changes the state the next rows must read (STATE-MODEL section 6), and
  // the expansion cannot see it: then (rarely: a saturated state) the block redoes the verify row
  // by row from H0, exactly as the row kernel does (cuda/gdn_decode.cu), bit for bit.
  if (__syncthreads_or(saturated)) {
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      const int i = ty * RPT + r;
      if (owner && i < kd) load_vec<VEC>(hlive + size_t(i) * vd, H[r]);
    }
    for (int t = 0; t < K; ++t) {
      float* pt = part + t * part_sz;
      float vr[VEC];  // hk = H^T k_t over this thread's rows, then over the tile's
#pragma unroll
      for (int e = 0; e < VEC; ++e) vr[e] = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = ty * RPT + r;
        if (i < kd) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) vr[e] = __fmaf_rn(H[r][e], sk[t * kd + i], vr[e]);
        }
      }
      rows_sum_publish<VEC>(vr, p, th, pt);
      __syncthreads();
      rows_sum_collect<VEC>(vr, p, th, pt);
      const float g = sgb[2 * t], beta = sgb[2 * t + 1];
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        vr[e] = owner ? __fmul_rn(__fsub_rn(sv[t * TJ + jl + e], __fmul_rn(g, vr[e])), beta) : 0.0f;
      __syncthreads();  // every sum of pt is read before pt takes the output partials
      HT* inter = inter_of(t);
      float po[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) po[e] = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = ty * RPT + r;
        if (i < kd) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            H[r][e] = HStore<HT>::round(__fmaf_rn(sk[t * kd + i], vr[e], __fmul_rn(g, H[r][e])));
            po[e] = __fmaf_rn(H[r][e], sq[t * kd + i], po[e]);
          }
          if (inter && owner) store_vec<VEC>(inter + size_t(i) * vd, H[r]);
        }
      }
      rows_sum_publish<VEC>(po, p, th, pt);
    }
    __syncthreads();
  }
  if (owner) store_rows<RPT, VEC>(H, hlive, vd, ty, kd);

  if (owner && ty == 0) {
    for (int t = 0; t < K; ++t) {
      float o[VEC];
      rows_sum_collect<VEC>(o, p, th, part + t * part_sz);
#pragma unroll
      for (int e = 0; e < VEC; ++e) o[e] = __fmul_rn(o[e], p.qscale);
      store_vec<VEC>(p.o + (size_t(b) * K + t) * size_t(p.nv) * vd + size_t(vh) * vd + jt + jl, o);
    }
  }
}

template <typename HT, int VEC, int KMAX>
void launch_t(const RowsParams& p, int threads, cudaStream_t s) {
  const OrderedKernel<RowsParams> k{&gdn_verify_wy_kernel<HT, VEC, KMAX, false>,
                                    &gdn_verify_wy_kernel<HT, VEC, KMAX, true>};
  const size_t smem = sizeof(float) * (size_t(KMAX) * p.ty_groups * p.tx_pad * VEC + 2 * size_t(KMAX) * p.kd +
                                       size_t(KMAX) * p.tj + 2 * KMAX + KMAX * KMAX);
  static std::once_flag once;  // raise the dynamic shared-memory limit once per instance
  std::call_once(once, [&] {
    SSM_CUDA(cudaFuncSetAttribute(k.shipped, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    SSM_CUDA(cudaFuncSetAttribute(k.ordered, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
  });
  launch_ordered("gdn_verify_wy_kernel", k, dim3(unsigned(p.ntiles * p.nv), unsigned(p.B)), dim3(unsigned(threads)),
                 smem, s, true, p, &RowsParams::order);
}

template <typename HT, int KMAX>
void launch_h(const RowsParams& p, int vec, int threads, cudaStream_t s) {
  if (vec == 4) launch_t<HT, 4, KMAX>(p, threads, s);
  else launch_t<HT, 1, KMAX>(p, threads, s);
}

}  // namespace

void launch_gdn_verify_wy(RowsParams p, bool h_f16, int min_ctas, cudaStream_t stream) {
  if (p.B == 0) return;
  if (p.R < 1 || p.R > kWyMaxRows) throw std::invalid_argument("gdn verify wy: K out of range 1..8");
  const RowsLayout L = rows_layout(p.kd, p.vd, p.nv, p.B, 256, min_ctas);
  p.tx_n = L.tx_n;
  p.ty_n = L.ty_n;
  p.ty_groups = L.ty_groups;
  p.tx_pad = L.tx_pad;
  p.tj = L.tj;
  p.ntiles = L.ntiles;
  if (p.R <= 4) {
    if (h_f16) launch_h<__half, 4>(p, L.vec, L.threads, stream);
    else launch_h<float, 4>(p, L.vec, L.threads, stream);
  } else {
    if (h_f16) launch_h<__half, 8>(p, L.vec, L.threads, stream);
    else launch_h<float, 8>(p, L.vec, L.threads, stream);
  }
}

}  // namespace ssm::cuda
