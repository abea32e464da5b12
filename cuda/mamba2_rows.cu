// The Mamba-2 row kernel: decode (R = 1), verify (R = K), prefill (R = T).
// Types: h FP32 or FP16 (HT), every other tensor FP32; arithmetic FP32 with explicit rounding
// intrinsics (__fmaf_rn, __fmul_rn, __fadd_rn), so no compiler contraction can make two call
// sites differ.
// Math per row t and head h (group g = h / (nh/ng)): H[p][n] <- dA H[p][n] + (dt x[p]) B[n];
// y[p] = sum_n H[p][n] C[n] + D x[p], from the stored state (FP16: the clamped, rounded value
// is carried, as half2 pairs where VEC is 4, stored and read by y).
// Shapes: H [nh][hp][ns] per slot; xbc [B][R][nh*hp + 2*ng*ns]; gates [B][R][nh][2]; y [B][R][nh*hp].
// Launch: grid (ptiles * nh, B), block warps * 32 threads (mamba2_rows.h for the layout). Each
//   warp owns whole rows p of H in registers: read once, carried through the R rows, stored once
//   plus the intermediates. A row's y is the warp's butterfly sum (every lane gets the same
//   bits). No shared memory, no barrier: the warps of a CTA never exchange anything. Launched as
//   a programmatic dependent of the conv kernel: its H is loaded before waiting for it (the conv
//   kernel never writes H), the conv outputs and gates after.
// Counterpart: reference/mamba2_step.cpp, reference/mamba2_ssm.cpp.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/layer_spec.h"
#include "cuda/check.h"
#include "cuda/block_order.cuh"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/h_regs.cuh"
#include "cuda/mamba2_rows.h"
#include "cuda/mutant_bits.h"

namespace ssm::cuda {

namespace {
// State values per thread, and the CTAs per SM the registers are held to with VEC 4 (VEC 1, odd
// shapes only, keeps what the compiler takes). Measured on the H200 (nemotron-h-8b, 24 layers,
// Dec 2, docs/cuda.md "Measured: Mamba-2"): 16 values at 4 CTAs (64 registers: the general
// instance spills 8-16 bytes, the decode instance ONE_ROW needs 56, FP16's 48 with its half2
// carry) against 80 registers and 3 CTAs: FP32 decode B = 128 8.9 -> 6.9 ms per step, verify K=4
// 20.1 -> 19.1 ms, FP16 decode 7.1 -> 5.7 ms. Slower: 5 CTAs (48 registers, 88-108 bytes spilled;
// the FP32 decode instance at 48 registers without a spill: 1.3-4%), 8 values at 4 CTAs.
// FP16 decode takes kMamba2ValsWide (32 values, 16 registers of half2 pairs, 64 in all, no spill)
// when the 16-value grid is more than the GPU holds at once (> 4 CTAs per SM): twice the bytes in
// flight per CTA; B = 128 decode 4.30 -> 3.94 ms per step, B = 32 1.13 -> 1.09, B = 4 0.259 ->
// 0.238; at B = 1 and 2, where the 16-value grid is resident at once, 32 values measured 5-7%
// slower (twice the rows in each warp's chain). FP16 verify keeps 16 (32 spill 40-80 bytes in the
// general instance).
constexpr int kMamba2Vals = 16;
constexpr int kMamba2ValsWide = 32;
constexpr int kMamba2MinCtasVec4 = 4;

std::atomic<int> forced_decode_values{0};
}  // namespace

void force_mamba2_decode_values(int values) {
  if (values != 0 && values != kMamba2Vals && values != kMamba2ValsWide)
    throw std::invalid_argument("force_mamba2_decode_values: 0 (by the work), 16 or 32, not " + std::to_string(values));
  forced_decode_values.store(values);
}

Mamba2RowsLayout mamba2_rows_layout(int nh, int hp, int ns, int B, int sms, bool h_f16, bool one_row) {
  Mamba2RowsLayout L{};
  if (ns < 1 || ns > kMaxHeadDim)  // LayerSpec::validate refuses these first
    throw std::invalid_argument("mamba2 rows: ns=" + std::to_string(ns) + " is outside the contract's 1.." +
                                std::to_string(kMaxHeadDim) + " state columns");
  L.vec = ns % 4 == 0 ? 4 : 1;
  L.nc = (ns + 32 * L.vec - 1) / (32 * L.vec);  // VEC 4: 1 or 2
  if (L.vec == 1) L.nc = L.nc <= 2 ? L.nc : L.nc <= 4 ? 4 : 8;  // the instances: 1, 2, 4, 8
  auto place = [&](int vals) {
    L.vals = vals;
    L.rpw = std::max(1, vals / (L.vec * L.nc));
    const int need = (hp + L.rpw - 1) / L.rpw;  // warps to cover a head
    L.warps = std::min(8, need);
    auto ctas = [&](int w) { return int64_t(B) * nh * ((need + w - 1) / w); };
    while (L.warps > 1 && ctas(L.warps) < 2 * int64_t(sms)) L.warps /= 2;
    L.ptiles = (need + L.warps - 1) / L.warps;
    return ctas(L.warps);
  };
  const int64_t ctas = place(kMamba2Vals);
  if (h_f16 && one_row && L.vec == 4) {
    const int forced = forced_decode_values.load();
    if (forced == kMamba2ValsWide || (forced == 0 && ctas > int64_t(kMamba2MinCtasVec4) * sms)) place(kMamba2ValsWide);
  }
  return L;
}

namespace {

// ONE_ROW: the instance for R = 1 without intermediates (decode): the same operations per row as
// the general instance, with the row loop and the intermediate store compiled away. VALS: state
// values per thread (mamba2_rows_layout).
template <typename HT, int VEC, int NC, bool ONE_ROW, int VALS, bool ORDERED>
__global__ void __launch_bounds__(256, VEC == 4 ? kMamba2MinCtasVec4 : 1) mamba2_rows_kernel(Mamba2RowsParams p) {
  constexpr int RPW = VALS / (VEC * NC) > 0 ? VALS / (VEC * NC) : 1;
  allow_dependents();  // the output norm may launch now (it reads z and weights, then waits for this kernel)
  const uint2 lb = logical_block<ORDERED>(p.order);
  const int head = int(lb.x) / p.ptiles, tile = int(lb.x) % p.ptiles, b = int(lb.y);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hp = p.hp, ns = p.ns;
  const int p0 = (tile * p.warps + warp) * RPW;  // this warp's first row
  if (p0 >= hp) return;                           // no barrier anywhere: idle warps may leave
  const int g = head / (p.nh / p.ng);
  const int slot = p.slots[b];
  const int d_inner = p.nh * hp, conv_dim = d_inner + 2 * p.ng * ns;
  const size_t base = size_t(head) * hp * ns;
  // B and C start 16-byte aligned in every row (nh * hp a multiple of 4): read 4 at a time when VEC
  // is 4, else one at a time (preset mamba-wide's layer 1)
  const bool bc_vec = ((d_inner | conv_dim) & 3) == 0 && (reinterpret_cast<uintptr_t>(p.xbc) & 15) == 0;

  HT* hlive = reinterpret_cast<HT*>(p.h + size_t(slot) * p.h_pitch) + base;
  using Regs = HRegs<HT, RPW * NC, VEC>;
  Regs H;  // row r, column block c at index r * NC + c
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int n = (c * 32 + lane) * VEC, row = p0 + r;
      if (row < hp && n < ns) H.load(r * NC + c, hlive + size_t(row) * ns + n);
      else H.clear(r * NC + c);
    }

  // H is read before waiting for the conv kernel, which never writes it (its loads overlap the
  // conv kernel's run); the conv outputs and gates after
  wait_for_previous();

  // mutant (bug class 4): the intermediate table indexed one slot off (in bounds)
  const size_t first = size_t(p.inter_first[SSM_DEVICE_MUTANT(p, kMutInterStride) && slot > 0 ? slot - 1 : slot]);
  const RowSteps<ONE_ROW> steps(p);
  const int R = steps.R, n_inter = steps.n_inter;
  for (int t = 0; t < R; ++t) {
    const size_t row_t = size_t(b) * R + t;
    const float* xb = p.xbc + row_t * conv_dim;
    const float dt = p.gates[(row_t * p.nh + head) * 2], dA = p.gates[(row_t * p.nh + head) * 2 + 1];
    const float Dh = p.D[head];
    const float* xh = xb + head * hp + p0;                       // this warp's x
    float* yh = p.y + row_t * d_inner + size_t(head) * hp + p0;  // and y
    float Bv[NC][VEC], Cv[NC][VEC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int n = (c * 32 + lane) * VEC;
      if (VEC == 4 && bc_vec) {
        if (n < ns) {
          load_vec<VEC>(xb + d_inner + g * ns + n, Bv[c]);
          load_vec<VEC>(xb + d_inner + (p.ng + g) * ns + n, Cv[c]);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) Bv[c][e] = Cv[c][e] = 0.0f;
        }
        continue;
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        Bv[c][e] = n + e < ns ? xb[d_inner + g * ns + n + e] : 0.0f;
        Cv[c][e] = n + e < ns ? xb[d_inner + (p.ng + g) * ns + n + e] : 0.0f;
      }
    }
    HT* inter = t < n_inter ? reinterpret_cast<HT*>(p.h_inter + (first + size_t(t)) * p.h_pitch) + base : nullptr;
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const int row = p0 + r;
      if (row >= hp) break;  // uniform over the warp
      const float x = xh[r];
      const float u = __fmul_rn(dt, x);
      float acc = 0.0f;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int n = (c * 32 + lane) * VEC, i = r * NC + c;
        if (n >= ns) continue;  // columns past ns: nothing (an infinite u would make 0*inf = NaN in y)
        // FP16 with VEC 4 carries half2 pairs (h_regs.cuh) and rounds a pair per store; the float
        // form keeps the per-value order the FP32 build's registers were tuned with (written as the
        // pair form, its general instance spilled 24 bytes instead of 8). Same operations per value.
        if constexpr (Regs::kPairs) {
          float v[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            v[e] = __fmaf_rn(u, Bv[c][e], __fmul_rn(dA, H.get(i, e)));
            // mutant (class 9): +-1024 is exact in FP16 and the rounding monotone, so clamping
            // before the rounding stores what clamping after it would (NaN too: fmaxf gives -1024)
            if (SSM_DEVICE_MUTANT(p, kMutHStoreClamp)) v[e] = fminf(fmaxf(v[e], -1024.0f), 1024.0f);
          }
          H.set_row(i, v);  // the clamped FP16 store, a pair at a time: the value carried, stored and read by y
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc = __fmaf_rn(H.get(i, e), Cv[c][e], acc);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            float v = HStore<HT>::round(__fmaf_rn(u, Bv[c][e], __fmul_rn(dA, H.v[i][e])));
            if (SSM_DEVICE_MUTANT(p, kMutHStoreClamp)) v = fminf(fmaxf(v, -1024.0f), 1024.0f);  // mutant (class 9)
            H.v[i][e] = v;
            acc = __fmaf_rn(v, Cv[c][e], acc);
          }
        }
        if (inter) H.store(i, inter + unsigned(row * ns + n));  // within a head: an int
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, o));
      if (lane == (r & 31)) yh[r] = __fmaf_rn(Dh, x, acc);
    }
  }

#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int n = (c * 32 + lane) * VEC, row = p0 + r;
      if (row < hp && n < ns) H.store(r * NC + c, hlive + size_t(row) * ns + n);
    }
}

template <typename HT, int VEC, int NC, bool ONE_ROW, int VALS>
void launch_k(const Mamba2RowsParams& p, cudaStream_t s) {
  launch_ordered("mamba2_rows_kernel",
                 OrderedKernel<Mamba2RowsParams>{&mamba2_rows_kernel<HT, VEC, NC, ONE_ROW, VALS, false>,
                                                 &mamba2_rows_kernel<HT, VEC, NC, ONE_ROW, VALS, true>},
                 dim3(unsigned(p.ptiles * p.nh), unsigned(p.B)), dim3(unsigned(p.warps * 32)), 0, s, true, p,
                 &Mamba2RowsParams::order);
}

template <typename HT, int VEC, int NC>
void launch_t(const Mamba2RowsParams& p, const Mamba2RowsLayout& L, cudaStream_t s) {
  if constexpr (std::is_same<HT, __half>::value && VEC == 4) {
    if (L.vals == kMamba2ValsWide) return launch_k<HT, VEC, NC, true, kMamba2ValsWide>(p, s);  // decode only
  }
  if (runs_one_row(p)) launch_k<HT, VEC, NC, true, kMamba2Vals>(p, s);
  else launch_k<HT, VEC, NC, false, kMamba2Vals>(p, s);
}

template <typename HT>
void launch_ht(const Mamba2RowsParams& p, const Mamba2RowsLayout& L, cudaStream_t s) {
  if (L.vec == 4) {
    if (L.nc == 1) launch_t<HT, 4, 1>(p, L, s);
    else launch_t<HT, 4, 2>(p, L, s);
  } else {  // ns not a multiple of 4 (odd shapes): a column per lane and block
    if (L.nc == 1) launch_t<HT, 1, 1>(p, L, s);
    else if (L.nc == 2) launch_t<HT, 1, 2>(p, L, s);
    else if (L.nc == 4) launch_t<HT, 1, 4>(p, L, s);
    else launch_t<HT, 1, 8>(p, L, s);
  }
}

}  // namespace

void launch_mamba2_rows(Mamba2RowsParams p, bool h_f16, int sms, cudaStream_t stream) {
  if (p.B == 0 || p.R == 0) return;
  const Mamba2RowsLayout L = mamba2_rows_layout(p.nh, p.hp, p.ns, p.B, sms, h_f16, runs_one_row(p));
  p.warps = L.warps;
  p.ptiles = L.ptiles;
  if (h_f16) launch_ht<__half>(p, L, stream);
  else launch_ht<float>(p, L, stream);
}

}  // namespace ssm::cuda
