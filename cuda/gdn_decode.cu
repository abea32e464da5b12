// The delta-rule row kernel: decode (R = 1), verify exact arm (R = K), prefill (R = T).
// Types: h FP32 or FP16 (HT), every other tensor FP32; arithmetic FP32 with explicit rounding
// intrinsics (__fmaf_rn, __fmul_rn, __fadd_rn), so no compiler contraction can make two call
// sites differ.
// Shapes: H [nv][kd][vd] per slot; qkv [B][R][conv_dim]; gb [B][R][nv][2]; o [B][R][nv*vd].
// Launch: grid (ntiles * nv, B); one CTA per (batch row, value head, column tile); block =
//   roundup(tx_n * ty_n, 32) <= 256 threads, at most 128 registers, so two CTAs share a
//   multiprocessor and one's loads overlap the other's barriers and stores. Thread (tx, ty) holds H[ty*RPT + r][col + e] for
//   RPT = 32/VEC rows and VEC columns (VEC = 4: float4 / 4-half vector access, coalesced along
//   vd) in registers. H is read once, carried through the R rows and stored once (plus the
//   intermediates): a decode moves each state byte twice. Per row: hk = H^T k as per-thread
//   partials over its RPT rows, summed over ty in order through shared memory; the update is
//   elementwise; o = H^T q the same way. FP16 state is rounded (clamped store) after every row
//   and the rounded value is carried, stored and read by o. Three barriers per row.
// Counterpart: reference/gdn_step.cpp, reference/gdn_delta_rule.cpp.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/gdn_decode.h"
#include "cuda/mutant_bits.h"

namespace ssm::cuda {

RowsLayout rows_layout(int kd, int vd, int nv, int B, int max_threads, int min_ctas) {
  RowsLayout L{};
  L.vec = vd % 4 == 0 ? 4 : 1;
  L.rpt = 32 / L.vec;
  L.ty_n = (kd + L.rpt - 1) / L.rpt;  // <= 32 for kd <= 256
  const int need = (vd + L.vec - 1) / L.vec;
  L.tx_n = std::max(1, std::min(need, max_threads / L.ty_n));
  auto ctas = [&](int tx) { return int64_t(B) * nv * ((need + tx - 1) / tx); };
  while (L.tx_n >= 16 && ctas(L.tx_n) < min_ctas) L.tx_n /= 2;
  L.tj = L.tx_n * L.vec;
  L.ntiles = (vd + L.tj - 1) / L.tj;
  L.threads = (L.tx_n * L.ty_n + 31) / 32 * 32;
  if (L.threads > max_threads)
    throw std::invalid_argument("gdn rows: no block layout for kd=" + std::to_string(kd) + " vd=" + std::to_string(vd));
  return L;
}

namespace {

template <typename HT, int VEC>
__global__ void __launch_bounds__(256, 2) gdn_rows_kernel(RowsParams p) {
  constexpr int RPT = 32 / VEC;
  extern __shared__ float smem[];
  const int kd = p.kd, vd = p.vd, TX = p.tx_n, TY = p.ty_n, TJ = p.tj;
  float* part = smem;             // [TY][TJ] per-ty partials of H^T k (16-byte aligned rows)
  float* part2 = part + TY * TJ;  // [TY][TJ] per-ty partials of H^T q
  float* sq = part2 + TY * TJ;    // [kd]
  float* sk = sq + kd;            // [kd]
  float* sv = sk + kd;            // [TJ] this tile's v
  float* sgb = sv + TJ;           // [2] g, beta

  const int vh = blockIdx.x / p.ntiles, tile = blockIdx.x % p.ntiles, b = blockIdx.y;
  const int kh = vh / (p.nv / p.nk);
  const int slot = p.slots[b];
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int jt = tile * TJ;            // first column of the tile
  const int jl = tx * VEC;             // this thread's first column inside the tile
  const bool owner = ty < TY && jt + jl < vd;
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

  for (int t = 0; t < p.R; ++t) {
    const size_t row = size_t(b) * p.R + t;
    const float* y = p.qkv + row * conv_dim;
    for (int c = tid; c < kd; c += blockDim.x) {
      sq[c] = y[kh * kd + c];
      sk[c] = y[(p.nk + kh) * kd + c];
    }
    for (int c = tid; c < TJ && jt + c < vd; c += blockDim.x) sv[c] = y[2 * p.nk * kd + vh * vd + jt + c];
    if (tid < 2) sgb[tid] = p.gb[(row * p.nv + vh) * 2 + tid];
    __syncthreads();

    if (owner) {  // hk = H^T k over this thread's rows
      float pk[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) pk[e] = 0.0f;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = ty * RPT + r;
        if (i < kd) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) pk[e] = __fmaf_rn(H[r][e], sk[i], pk[e]);
        }
      }
      store_vec<VEC>(part + ty * TJ + jl, pk);
    }
    if (!SSM_DEVICE_MUTANT(p, kMutMissingBarrier)) __syncthreads();  // mutant (bug class 18): no barrier

    if (owner) {
      const float g = sgb[0], beta = sgb[1];
      float hk[VEC], vn[VEC], po[VEC];
      sum_partials<VEC>(part, TY, TJ, jl, hk);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        vn[e] = __fmul_rn(__fsub_rn(sv[jl + e], __fmul_rn(g, hk[e])), beta);
        po[e] = 0.0f;
      }
      // mutant (bug class 4): the intermediate table indexed one slot off, so one sequence's
      // intermediates land in its neighbour's (in bounds: never past the family)
      const size_t first =
          size_t(p.inter_first[SSM_DEVICE_MUTANT(p, kMutInterStride) && slot > 0 ? slot - 1 : slot]);
      HT* inter = t < p.n_inter ? reinterpret_cast<HT*>(p.h_inter + (first + size_t(t)) * p.h_pitch) + head : nullptr;
#pragma unroll
      for (int r = 0; r < RPT; ++r) {
        const int i = ty * RPT + r;
        if (i < kd) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            H[r][e] = HStore<HT>::round(__fmaf_rn(sk[i], vn[e], __fmul_rn(g, H[r][e])));
            if (SSM_DEVICE_MUTANT(p, kMutHStoreClamp))  // mutant (bug class 9): a clamp the math does not have
              H[r][e] = fminf(fmaxf(H[r][e], -1024.0f), 1024.0f);
            po[e] = __fmaf_rn(H[r][e], sq[i], po[e]);
          }
          if (inter) store_vec<VEC>(inter + size_t(i) * vd, H[r]);
        }
      }
      store_vec<VEC>(part2 + ty * TJ + jl, po);
    }
    __syncthreads();

    if (owner && ty == 0) {
      float o[VEC];
      sum_partials<VEC>(part2, TY, TJ, jl, o);
#pragma unroll
      for (int e = 0; e < VEC; ++e) o[e] = __fmul_rn(o[e], p.qscale);
      store_vec<VEC>(p.o + row * size_t(p.nv) * vd + size_t(vh) * vd + jt + jl, o);
    }
    // part2 is next written after the next row's first two barriers: no third barrier needed
  }

  if (owner) {
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
      const int i = ty * RPT + r;
      if (i < kd) store_vec<VEC>(hlive + size_t(i) * vd, H[r]);
    }
  }
}

template <typename HT, int VEC>
void launch_t(const RowsParams& p, int threads, cudaStream_t s) {
  const size_t smem = sizeof(float) * (2 * size_t(p.ty_n) * p.tj + 2 * size_t(p.kd) + p.tj + 2);
  // at most 2*256*4 + 2*256 + 256 floats: under the default 48 KB
  gdn_rows_kernel<HT, VEC><<<dim3(unsigned(p.ntiles * p.nv), unsigned(p.B)), dim3(unsigned(threads)), smem, s>>>(p);
  SSM_CUDA_LAUNCHED("gdn_rows_kernel");
}

}  // namespace

void launch_gdn_rows(RowsParams p, bool h_f16, int min_ctas, cudaStream_t stream) {
  if (p.B == 0 || p.R == 0) return;
  const RowsLayout L = rows_layout(p.kd, p.vd, p.nv, p.B, 256, min_ctas);
  p.tx_n = L.tx_n;
  p.ty_n = L.ty_n;
  p.tj = L.tj;
  p.ntiles = L.ntiles;
  if (h_f16) {
    if (L.vec == 4) launch_t<__half, 4>(p, L.threads, stream);
    else launch_t<__half, 1>(p, L.threads, stream);
  } else {
    if (L.vec == 4) launch_t<float, 4>(p, L.threads, stream);
    else launch_t<float, 1>(p, L.threads, stream);
  }
}

}  // namespace ssm::cuda
