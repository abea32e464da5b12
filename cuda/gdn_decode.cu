// The delta-rule row kernel: decode (R = 1), verify exact arm (R = K), prefill (R = T).
// Types: h FP32 or FP16 (HT), every other tensor FP32; arithmetic FP32 with explicit rounding
// intrinsics (__fmaf_rn, __fmul_rn, __fadd_rn), so no compiler contraction can make two call
// sites differ.
// Shapes: H [nv][kd][vd] per slot; qkv [B][R][conv_dim]; gb [B][R][nv][2]; o [B][R][nv*vd].
// Launch: persistent CTAs (as many as stay resident, two per SM for FP32 kd = vd = 128), each
//   running work items (batch row, value head, column tile) in turn; block = roundup(tx_n * ty_n,
//   32) <= 256 threads, at most 128 registers. The next item's H tile and the next row's inputs
//   are copied into shared memory with cp.async while the current item computes and stores, so
//   the memory system always has the next tile in flight. Thread (tx, ty) holds H[ty*RPT + r][col + e] for
//   RPT = 32/VEC rows and VEC columns (VEC = 4: float4 / 4-half vector access, coalesced along
//   vd) in registers. H is read once, carried through the R rows and stored once (plus the
//   intermediates): a decode moves each state byte twice. Per row: hk = H^T k as per-thread
//   partials over its RPT rows, summed over ty in order through shared memory; the update is
//   elementwise; o = H^T q the same way. FP16 state is rounded (clamped store) after every row
//   and the rounded value is carried, stored and read by o. Three barriers per row.
// Counterpart: reference/gdn_step.cpp, reference/gdn_delta_rule.cpp.
#include <cuda_pipeline.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
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

// Shared memory of one CTA, in floats: the two partial arrays, `stages` buffers of one row
// step's inputs (q, k, this tile's v, g and beta), then (when H is staged) `stages` copies of the
// tile's H, each [RPT][threads] vectors of VEC elements, so a thread copies and reads back only
// its own.
struct RowsSmem {
  int part, part2, in, in_stride, hbuf, floats;
};
__host__ __device__ inline RowsSmem rows_smem(int ty_n, int tj, int kd, int threads, int rpt, int h_vec_bytes,
                                              int stages) {
  RowsSmem m{};
  m.part = 0;
  m.part2 = ty_n * tj;
  m.in = 2 * ty_n * tj;
  m.in_stride = (2 * kd + tj + 2 + 3) / 4 * 4;  // q, k, v, g and beta (copy_row_inputs), 16-byte rows
  m.hbuf = (m.in + stages * m.in_stride + 3) / 4 * 4;  // 16-byte aligned
  m.floats = m.hbuf + (stages * rpt * threads * h_vec_bytes + 3) / 4;
  return m;
}

// One work item is a (batch row, value head, column tile); item = (b * nv + vh) * ntiles + tile.
struct RowsItem {
  int b, vh, tile, kh, slot, jt;
  bool owner;
  size_t head;
};
__device__ __forceinline__ RowsItem rows_item(const RowsParams& p, int item, int tx, int ty) {
  RowsItem w;
  w.tile = item % p.ntiles;
  w.vh = (item / p.ntiles) % p.nv;
  w.b = item / (p.ntiles * p.nv);
  w.kh = w.vh / (p.nv / p.nk);
  w.slot = p.slots[w.b];
  w.jt = w.tile * p.tj;
  const int jl = tx * (p.tj / p.tx_n);
  w.owner = ty < p.ty_n && w.jt + jl < p.vd;
  w.head = size_t(w.vh) * p.kd * p.vd + w.jt + jl;
  return w;
}

// Starts the asynchronous copy of row t's inputs of item w into in[]: q and k of head kh, the
// tile's v, g and beta (4-byte copies: no alignment asked of the caller's rows).
__device__ __forceinline__ void copy_row_inputs(const RowsParams& p, const RowsItem& w, int t, float* in) {
  const int kd = p.kd, TJ = p.tj;
  const int conv_dim = 2 * p.nk * kd + p.nv * p.vd;
  const size_t row = size_t(w.b) * p.R + t;
  const float* y = p.qkv + row * conv_dim;
  const int n = 2 * kd + TJ + 2;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    const float* src;
    if (c < kd) src = y + w.kh * kd + c;
    else if (c < 2 * kd) src = y + (p.nk + w.kh) * kd + (c - kd);
    else if (c < 2 * kd + TJ) {
      const int j = w.jt + c - 2 * kd;
      if (j >= p.vd) continue;  // past the last column: never read
      src = y + 2 * p.nk * kd + w.vh * p.vd + j;
    } else src = p.gb + (row * p.nv + w.vh) * 2 + (c - 2 * kd - TJ);
    __pipeline_memcpy_async(in + c, src, sizeof(float));
  }
}

// Starts the asynchronous copy of this thread's rows of item w's H into its own stage slots.
template <typename HT, int VEC>
__device__ __forceinline__ void copy_h(const RowsParams& p, const RowsItem& w, int ty, HT* stage) {
  constexpr int RPT = 32 / VEC;
  if (!w.owner) return;
  const HT* hlive = reinterpret_cast<const HT*>(p.h + size_t(w.slot) * p.h_pitch) + w.head;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = ty * RPT + r;
    if (i < p.kd)
      __pipeline_memcpy_async(stage + (size_t(r) * blockDim.x + threadIdx.x) * VEC, hlive + size_t(i) * p.vd,
                              sizeof(HT) * VEC);
  }
}

// Pipeline depth of the row kernel: the copies of step s + kRowsStages - 1 are issued at step s.
// Two stages (one step ahead) measured fastest on the H200 (Dec 1, qwen3-next-80b layer, B = 32
// decode): 48.3 us per layer with two, 56.7 with three (FP32 H) and four (FP16 H), the
// deeper pipelines costing more than their prefetch won (not explained yet: see docs/cuda.md).
constexpr int kRowsStages = 2;

// Persistent CTAs: CTA c runs items c, c + gridDim.x, ...; each item runs its R row steps. The
// copies of the step kRowsStages - 1 ahead (its inputs and, when it starts an item, that item's H)
// are issued with cp.async before this step computes, so the loads of later tiles overlap the
// arithmetic and the stores of this one. Every item is computed exactly as by a CTA of its own:
// the grid size, the number of stages and the order of items never change a bit. kStageH: H
// moves through shared memory (cp.async takes 4, 8 or 16 bytes; FP16 with VEC = 1 is 2 bytes
// and is loaded directly).
// MINB: CTAs per SM the registers are held to. 2 for every kernel; FP16 with VEC = 4 also has a
// 4-CTA twin (64 registers against 118, an 8-byte spill; its shared memory allows 4), launched
// when the work has more items than the 2-CTA grid holds at once (launch_gdn_rows): the same
// code and arithmetic, so the same bits (RowsVariantGpu), only more items in flight.
template <typename HT, int VEC, int MINB>
__global__ void __launch_bounds__(256, MINB) gdn_rows_kernel(RowsParams p) {
  constexpr int RPT = 32 / VEC;
  constexpr int stages = kRowsStages;
  constexpr bool kStageH = sizeof(HT) * VEC >= 4;
  extern __shared__ __align__(16) float smem[];
  const int kd = p.kd, vd = p.vd, TX = p.tx_n, TY = p.ty_n, TJ = p.tj;
  const RowsSmem m = rows_smem(TY, TJ, kd, blockDim.x, RPT, kStageH ? int(sizeof(HT)) * VEC : 0, stages);
  float* part = smem + m.part;    // [TY][TJ] per-ty partials of H^T k
  float* part2 = smem + m.part2;  // [TY][TJ] per-ty partials of H^T q
  HT* hstage = reinterpret_cast<HT*>(smem + m.hbuf);
  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const int jl = tx * VEC;  // this thread's first column inside the tile
  const int n_items = p.B * p.nv * p.ntiles;
  const int my_items = n_items > int(blockIdx.x) ? (n_items - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x) : 0;
  const int my_steps = my_items * p.R;  // step s is row s % R of item blockIdx.x + (s / R) * gridDim.x
  const size_t stage_elems = size_t(RPT) * blockDim.x * VEC;
  if (my_steps == 0) return;
  allow_dependents();  // the output norm may launch now (it waits for this kernel's end)

  // Copies of step s: its inputs into buffer s % stages; when it starts an item, that item's H
  // into stage (s / R) % stages. One commit group per step, after one group of the H copies that
  // the prologue issues before waiting for the conv kernel (which never writes H).
  auto copy_step = [&](int s2, bool inputs, bool h) {
    if (s2 >= my_steps) return;
    const int k2 = s2 / p.R, t2 = s2 % p.R;
    const RowsItem w2 = rows_item(p, int(blockIdx.x) + k2 * int(gridDim.x), tx, ty);
    if (inputs) copy_row_inputs(p, w2, t2, smem + m.in + (s2 % stages) * m.in_stride);
    if constexpr (kStageH) {
      if (h && t2 == 0) copy_h<HT, VEC>(p, w2, ty, hstage + (k2 % stages) * stage_elems);
    }
  };
  for (int s2 = 0; s2 < stages - 1; ++s2) copy_step(s2, false, true);
  __pipeline_commit();
  wait_for_previous();  // the conv kernel's qkv and gates
  for (int s2 = 0; s2 < stages - 1; ++s2) {
    copy_step(s2, true, false);
    __pipeline_commit();
  }

  int step = 0;
  for (int k = 0; k < my_items; ++k) {
    const RowsItem w = rows_item(p, int(blockIdx.x) + k * int(gridDim.x), tx, ty);
    HT* hlive = reinterpret_cast<HT*>(p.h + size_t(w.slot) * p.h_pitch) + w.head;
    float H[RPT][VEC];

    for (int t = 0; t < p.R; ++t, ++step) {
      copy_step(step + stages - 1, true, true);
      __pipeline_commit();
      __pipeline_wait_prior(stages - 1);  // this step's copies (this thread's) have landed
      __syncthreads();                    // ... and everyone's

      const float* sq = smem + m.in + (step % stages) * m.in_stride;
      const float* sk = sq + kd;
      const float* sv = sk + kd;
      const float* sgb = sv + TJ;
      const size_t row = size_t(w.b) * p.R + t;

      if (t == 0) {
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = ty * RPT + r;
          if (w.owner && i < kd) {
            if constexpr (kStageH) load_vec<VEC>(hstage + (k % stages) * stage_elems + (size_t(r) * blockDim.x + tid) * VEC, H[r]);
            else load_vec<VEC>(hlive + size_t(i) * vd, H[r]);
          } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e) H[r][e] = 0.0f;
          }
        }
      }

      if (w.owner) {  // hk = H^T k over this thread's rows
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

      if (w.owner) {
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
            size_t(p.inter_first[SSM_DEVICE_MUTANT(p, kMutInterStride) && w.slot > 0 ? w.slot - 1 : w.slot]);
        HT* inter = t < p.n_inter ? reinterpret_cast<HT*>(p.h_inter + (first + size_t(t)) * p.h_pitch) + w.head : nullptr;
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

      if (w.owner && ty == 0) {
        float o[VEC];
        sum_partials<VEC>(part2, TY, TJ, jl, o);
#pragma unroll
        for (int e = 0; e < VEC; ++e) o[e] = __fmul_rn(o[e], p.qscale);
        store_vec<VEC>(p.o + row * size_t(p.nv) * vd + size_t(w.vh) * vd + w.jt + jl, o);
      }
      // No fourth barrier: part2 is next written after the next step's first two barriers, and
      // this step's input buffer is refilled by the copies issued at the start of the next step,
      // after every thread passed the barrier above, which all reads of it precede. H stage
      // k % stages is refilled for item k + stages, long after item k read it into registers.
    }

    if (w.owner) store_rows<RPT, VEC>(H, hlive, vd, ty, kd);
  }
  __pipeline_wait_prior(0);  // no copy outlives the CTA (the last commit is empty)
}

// Persistent grid: as many CTAs as the device keeps resident at once (never more than items).
// Once per device and kernel, the kernel may use all the shared memory a block can opt into (the
// attribute is the kernel's, not the launch's: setting it per launch size would shrink it under a
// larger launch's feet); the occupancy query runs once per device, kernel, block and smem size.
int resident_ctas(const void* kernel, int threads, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, int> optin;
  static std::map<std::tuple<int, const void*, int, size_t>, int> cache;
  int dev = 0;
  SSM_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, kernel, threads, smem);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  auto [o, fresh] = optin.try_emplace(std::make_pair(dev, kernel), 0);
  if (fresh) {
    SSM_CUDA(cudaDeviceGetAttribute(&o->second, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    SSM_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, o->second));
  }
  if (smem > size_t(o->second))
    throw std::runtime_error("gdn rows: " + std::to_string(smem) + " bytes of shared memory per block, the device allows " +
                             std::to_string(o->second));
  int per_sm = 0, sms = 0;
  SSM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  SSM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (per_sm < 1) throw std::runtime_error("gdn rows: no CTA of " + std::to_string(threads) + " threads and " +
                                           std::to_string(smem) + " bytes of shared memory fits a multiprocessor");
  return cache[key] = per_sm * sms;
}

template <typename HT, int VEC>
size_t rows_smem_bytes(const RowsParams& p, int threads) {
  constexpr bool kStageH = sizeof(HT) * VEC >= 4;
  const RowsSmem m = rows_smem(p.ty_n, p.tj, p.kd, threads, 32 / VEC, kStageH ? int(sizeof(HT)) * VEC : 0, kRowsStages);
  return sizeof(float) * size_t(m.floats);  // FP32, kd = vd = 128: 75 KB; two CTAs per SM
}

template <typename HT, int VEC, int MINB>
void launch_t(const RowsParams& p, int threads, cudaStream_t s) {
  const size_t smem = rows_smem_bytes<HT, VEC>(p, threads);
  const void* kernel = reinterpret_cast<const void*>(&gdn_rows_kernel<HT, VEC, MINB>);
  const int items = p.B * p.nv * p.ntiles;
  const int grid = std::min(items, resident_ctas(kernel, threads, smem));
  launch_dependent("gdn_rows_kernel", &gdn_rows_kernel<HT, VEC, MINB>, dim3(unsigned(grid)), dim3(unsigned(threads)),
                   smem, s, p);
}

std::atomic<int> forced_rows_ctas{0};

// FP16, VEC = 4: the 4-CTA twin when the 2-CTA grid cannot hold every item at once (B = 32 decode
// of qwen3-next-80b, H200: 1564 against 1716 us per step; at B = 1, where every item already runs
// at once, the 2-CTA kernel is the faster, 269 against 284 us).
void launch_f16_vec4(const RowsParams& p, int threads, cudaStream_t s) {
  int ctas = forced_rows_ctas.load();
  if (ctas == 0) {
    const void* two = reinterpret_cast<const void*>(&gdn_rows_kernel<__half, 4, 2>);
    ctas = p.B * p.nv * p.ntiles > resident_ctas(two, threads, rows_smem_bytes<__half, 4>(p, threads)) ? 4 : 2;
  }
  if (ctas == 4) launch_t<__half, 4, 4>(p, threads, s);
  else launch_t<__half, 4, 2>(p, threads, s);
}

}  // namespace

void force_rows_ctas_per_sm(int ctas) {
  if (ctas != 0 && ctas != 2 && ctas != 4)
    throw std::invalid_argument("force_rows_ctas_per_sm: 0 (by the work), 2 or 4, not " + std::to_string(ctas));
  forced_rows_ctas.store(ctas);
}

void launch_gdn_rows(RowsParams p, bool h_f16, int min_ctas, cudaStream_t stream) {
  if (p.B == 0 || p.R == 0) return;
  const RowsLayout L = rows_layout(p.kd, p.vd, p.nv, p.B, 256, min_ctas);
  p.tx_n = L.tx_n;
  p.ty_n = L.ty_n;
  p.tj = L.tj;
  p.ntiles = L.ntiles;
  if (h_f16) {
    if (L.vec == 4) launch_f16_vec4(p, L.threads, stream);
    else launch_t<__half, 1, 2>(p, L.threads, stream);
  } else {
    if (L.vec == 4) launch_t<float, 4, 2>(p, L.threads, stream);
    else launch_t<float, 1, 2>(p, L.threads, stream);
  }
}

}  // namespace ssm::cuda
