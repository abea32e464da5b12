// The delta-rule row kernel: decode (R = 1), verify exact arm (R = K), prefill (R = T).
// Types: h FP32 or FP16 (HT), every other tensor FP32; arithmetic FP32 with explicit rounding
// intrinsics (__fmaf_rn, __fmul_rn, __fadd_rn), so no compiler contraction can make two call
// sites differ.
// Shapes: H [nv][kd][vd] per slot; qkv [B][R][conv_dim]; gb [B][R][nv][2]; o [B][R][nv*vd].
// Launch: persistent CTAs (as many as stay resident, two per SM for FP32 kd = vd = 128), each
//   running work items (batch row, value head, column tile) in turn; block = tx_pad * ty_groups *
//   kRowLanes <= 256 threads, at most 128 registers. The next item's H tile and the next row's
//   inputs are copied into shared memory with cp.async while the current item computes and
//   stores, so the memory system always has the next tile in flight. Thread (tx, ty)
//   (gdn_rows_threads.cuh: a warp is 4 thread rows by 8 thread columns) holds H[ty*RPT + r][col +
//   e] for RPT = 32/VEC rows and VEC columns (VEC = 4: float4 / 4-half vector access along vd) in
//   registers. H is read once, carried through the R rows and stored once (plus the
//   intermediates): a decode moves each state byte twice. Per row: hk = H^T k as per-thread
//   partials over its RPT rows in order, a butterfly over the warp's 4 thread rows, then the
//   warps' partials in order through shared memory; the update is elementwise; o = H^T q the same
//   way. FP16 state is rounded (clamped store) after every row and the rounded value is carried
//   (as half2 pairs: HRegs), stored and read by o. Three barriers per row.
// Counterpart: reference/gdn_step.cpp, reference/gdn_delta_rule.cpp.
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/check.h"
#include "cuda/block_order.cuh"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/gdn_decode.h"
#include "cuda/gdn_rows_threads.cuh"
#include "cuda/h_regs.cuh"
#include "cuda/mutant_bits.h"

namespace ssm::cuda {

RowsLayout rows_layout(int kd, int vd, int nv, int B, int max_threads, int min_ctas) {
  RowsLayout L{};
  L.vec = vd % 4 == 0 ? 4 : 1;
  L.rpt = 32 / L.vec;
  L.ty_n = (kd + L.rpt - 1) / L.rpt;  // <= 32 for kd <= 256
  L.ty_groups = (L.ty_n + kRowLanes - 1) / kRowLanes;
  const int rows = L.ty_groups * kRowLanes;
  const int need = (vd + L.vec - 1) / L.vec;
  L.tx_n = std::max(1, std::min(need, max_threads / rows / kColLanes * kColLanes));
  auto ctas = [&](int tx) { return int64_t(B) * nv * ((need + tx - 1) / tx); };
  while (L.tx_n >= 16 && ctas(L.tx_n) < min_ctas) L.tx_n /= 2;
  L.tx_pad = (L.tx_n + kColLanes - 1) / kColLanes * kColLanes;
  L.tj = L.tx_n * L.vec;
  L.ntiles = (vd + L.tj - 1) / L.tj;
  L.threads = L.tx_pad * rows;  // a multiple of 32: warps of kRowLanes x kColLanes
  if (L.tx_n < 1 || L.threads > max_threads)
    throw std::invalid_argument("gdn rows: no block layout for kd=" + std::to_string(kd) + " vd=" + std::to_string(vd));
  return L;
}

namespace {

// Shared memory of one CTA, in floats: the two partial arrays ([ty_groups][tx_pad * VEC], for
// H^T k and H^T q: rows_sum_publish), `stages` buffers of one row step's inputs (q and k, each
// padded to kr = ty_n * RPT floats so a thread reads its RPT values as float4s; this tile's v; g
// and beta), then (when H is staged) `stages` copies of the tile's H, each [RPT][threads] vectors
// of VEC elements, so a thread copies and reads back only its own.
struct RowsSmem {
  int part, part2, kr, in, in_stride, hbuf, floats;
};
__host__ __device__ inline RowsSmem rows_smem(const RowsParams& p, int threads, int rpt, int vec, int h_vec_bytes,
                                              int stages) {
  RowsSmem m{};
  m.part = 0;
  m.part2 = p.ty_groups * p.tx_pad * vec;
  m.in = 2 * m.part2;  // a multiple of 8
  m.kr = p.ty_n * rpt;
  m.in_stride = (2 * m.kr + p.tj + 2 + 3) / 4 * 4;  // q, k, v, g and beta (copy_row_inputs), 16-byte rows
  m.hbuf = m.in + stages * m.in_stride;             // 16-byte aligned
  m.floats = m.hbuf + (stages * rpt * threads * h_vec_bytes + 3) / 4;
  return m;
}

// One work item is a (batch row, value head, column tile); item = (b * nv + vh) * ntiles + tile.
// Divided out once per item; h and intermediate 0 of the thread's first element as byte offsets
// from p.h and p.h_inter. The slot comes from item_slot, loaded one item earlier (its latency
// would otherwise stall the warp right before the item's copies are issued).
struct RowsItem {
  int b, vh, kh, jt;
  bool owner;
  size_t h_off, inter_off;
};
// Under a perturbed schedule (cuda/schedule.h, the ORDERED instance) item i is the order's
// logical_item(i).
template <bool ORDERED>
__device__ __forceinline__ int item_slot(const RowsParams& p, int item) {
  item = logical_item<ORDERED>(p.order, item);
  return item < p.B * p.nv * p.ntiles ? p.slots[item / (p.ntiles * p.nv)] : 0;
}
template <typename HT, bool ORDERED>
__device__ __forceinline__ RowsItem rows_item(const RowsParams& p, int item, int slot, int tx, int ty) {
  item = logical_item<ORDERED>(p.order, item);
  RowsItem w;
  const int tile = item % p.ntiles;
  w.vh = (item / p.ntiles) % p.nv;
  w.b = item / (p.ntiles * p.nv);
  w.kh = w.vh / (p.nv / p.nk);
  w.jt = tile * p.tj;
  const int jl = tx * (p.tj / p.tx_n);
  w.owner = ty < p.ty_n && tx < p.tx_n && w.jt + jl < p.vd;
  const size_t head = (size_t(w.vh) * p.kd * p.vd + w.jt + jl) * sizeof(HT);
  w.h_off = size_t(slot) * p.h_pitch + head;
  // mutant (bug class 4): the intermediate table indexed one slot off, so one sequence's
  // intermediates land in its neighbour's (in bounds: never past the family)
  w.inter_off =
      p.n_inter > 0
          ? size_t(p.inter_first[SSM_DEVICE_MUTANT(p, kMutInterStride) && slot > 0 ? slot - 1 : slot]) * p.h_pitch + head
          : 0;
  return w;
}

// Starts the asynchronous copy of row t's inputs of item w into in[]: q and k of head kh (at 0
// and kr), the tile's v (at 2 kr), g and beta. Rows that are 16-byte aligned throughout
// (p.in_vec4: kd and vd multiples of 4, qkv aligned) move in 16-byte pieces, g and beta in one
// 8-byte piece; otherwise every float alone (no alignment asked of the caller's rows).
__device__ __forceinline__ void copy_row_inputs(const RowsParams& p, const RowsItem& w, int t, int kr, float* in) {
  const int kd = p.kd, TJ = p.tj;
  const int conv_dim = 2 * p.nk * kd + p.nv * p.vd;
  const size_t row = size_t(w.b) * p.R + t;
  const float* y = p.qkv + row * conv_dim;
  const float* q = y + w.kh * kd;
  const float* k = y + (p.nk + w.kh) * kd;
  const float* v = y + 2 * p.nk * kd + w.vh * p.vd + w.jt;
  const float* gb = p.gb + (row * p.nv + w.vh) * 2;
  const int nv_cols = min(TJ, p.vd - w.jt);  // past the last column: never read
  if (p.in_vec4) {
    const int nq = kd / 4, nvc = nv_cols / 4;
    for (int c = threadIdx.x; c <= 2 * nq + nvc; c += blockDim.x) {
      if (c < nq) __pipeline_memcpy_async(in + 4 * c, q + 4 * c, 16);
      else if (c < 2 * nq) __pipeline_memcpy_async(in + kr + 4 * (c - nq), k + 4 * (c - nq), 16);
      else if (c < 2 * nq + nvc) __pipeline_memcpy_async(in + 2 * kr + 4 * (c - 2 * nq), v + 4 * (c - 2 * nq), 16);
      else __pipeline_memcpy_async(in + 2 * kr + TJ, gb, 8);
    }
  } else {
    for (int c = threadIdx.x; c < 2 * kd + nv_cols + 2; c += blockDim.x) {
      if (c < kd) __pipeline_memcpy_async(in + c, q + c, sizeof(float));
      else if (c < 2 * kd) __pipeline_memcpy_async(in + kr + (c - kd), k + (c - kd), sizeof(float));
      else if (c < 2 * kd + nv_cols) __pipeline_memcpy_async(in + 2 * kr + (c - 2 * kd), v + (c - 2 * kd), sizeof(float));
      else __pipeline_memcpy_async(in + 2 * kr + TJ + (c - 2 * kd - nv_cols), gb + (c - 2 * kd - nv_cols), sizeof(float));
    }
  }
}

// A thread's slot in each row of an H stage: a warp's lanes in the order their columns lie in
// memory (the kColLanes lanes of one thread row consecutive), so the copies of one H row's line
// land in consecutive shared memory. In thread order they scattered at 64-byte strides and the
// line was fetched in pieces (ncu, Dec 2, B = 32 decode: 2.8x the L2 requests, 1.8 M more
// sectors read, 20% slower).
__device__ __forceinline__ int stage_lane(int tid) {
  const int lane = tid % 32;
  return tid - lane + (lane % kRowLanes) * kColLanes + lane / kRowLanes;
}

// Starts the asynchronous copy of this thread's rows of item w's H into its own stage slots.
template <typename HT, int VEC>
__device__ __forceinline__ void copy_h(const RowsParams& p, const RowsItem& w, int ty, HT* stage) {
  constexpr int RPT = 32 / VEC;
  if (!w.owner) return;
  const HT* hlive = reinterpret_cast<const HT*>(p.h + w.h_off);
  const int slot = stage_lane(int(threadIdx.x));
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = ty * RPT + r;
    if (i < p.kd)
      __pipeline_memcpy_async(stage + (size_t(r) * blockDim.x + slot) * VEC, hlive + size_t(i) * p.vd, sizeof(HT) * VEC);
  }
}

// Four of this thread's values of a q or k row in shared memory, s[ty*RPT + r0 ...], 16-byte
// aligned (rows past kd are padding the caller never uses); zeros for padding lanes ty >= ty_n.
template <int RPT>
__device__ __forceinline__ float4 thread_rows4(const float* s, int ty, int ty_n, int r0) {
  return ty < ty_n ? *reinterpret_cast<const float4*>(s + ty * RPT + r0) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// Pipeline depth of the row kernel: the copies of step s + 1 are issued at the start of step s,
// before it waits for its own, into the buffers step s - 1 read. Two stages (one step ahead) measured
// fastest on the H200 (Dec 1, qwen3-next-80b layer, B = 32 decode): 48.3 us per layer with two,
// 56.7 with three (FP32 H) and four (FP16 H).
constexpr int kRowsStages = 2;

// Persistent CTAs: CTA c runs items c, c + gridDim.x, ...; each item runs its R row steps. The
// copies of the next step (its inputs and, when it starts an item, that item's H) are issued with
// cp.async before this step computes, so the loads of later tiles overlap the arithmetic and the
// stores of this one. Every item is computed exactly as by a CTA of its own: the grid size and
// the order of items never change a bit. kStageH: H moves through shared memory (cp.async takes
// 4, 8 or 16 bytes; FP16 with VEC = 1 is 2 bytes and is loaded directly).
// Three barriers per row step: the inputs have landed (and the buffers of the step before are
// free), the H^T k partials are written, the H^T q partials are written (gdn_rows_threads.cuh).
// MINB: CTAs per SM the registers are held to. 2 for every kernel; FP16 with VEC = 4 also has a
// 4-CTA twin, launched when the work has more items than the 2-CTA grid holds at once
// (launch_gdn_rows): the same code and arithmetic, so the same bits (RowsVariantGpu), only more
// items in flight. ONE_ROW: the instance a decode runs (R = 1, no intermediates), the row loop and
// the intermediate store compiled away; the same operations per row, so verify still equals K
// decodes bit for bit. qwen3-next-80b on the H200 (Dec 2): FP16 decode 6-13% faster, FP32 2-7%
// faster at B = 2..16, level from B = 32, 2.5% slower at B = 1 (docs/cuda.md).
template <typename HT, int VEC, int MINB, bool ONE_ROW, bool ORDERED>
__global__ void __launch_bounds__(256, MINB) gdn_rows_kernel(RowsParams p) {
  constexpr int RPT = 32 / VEC;
  const RowSteps<ONE_ROW> steps(p);
  const int R = steps.R, n_inter = steps.n_inter;
  static_assert(kRowsStages == 2, "the copies of step s + 1 go to the buffers step s - 1 read");
  constexpr bool kStageH = sizeof(HT) * VEC >= 4;
  extern __shared__ __align__(16) float smem[];
  const int kd = p.kd, vd = p.vd, TJ = p.tj;
  const RowsSmem m = rows_smem(p, blockDim.x, RPT, VEC, kStageH ? int(sizeof(HT)) * VEC : 0, kRowsStages);
  float* part = smem + m.part;    // per-group partials of H^T k
  float* part2 = smem + m.part2;  // per-group partials of H^T q
  float* in = smem + m.in;
  HT* hstage = reinterpret_cast<HT*>(smem + m.hbuf);
  const int tid = threadIdx.x;
  const RowsThread th = rows_thread(p);
  const int tx = th.tx, ty = th.ty;
  const int jl = tx * VEC;  // this thread's first column inside the tile
  const int n_items = p.B * p.nv * p.ntiles;
  const int my_items = n_items > int(blockIdx.x) ? (n_items - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x) : 0;
  const size_t stage_elems = size_t(RPT) * blockDim.x * VEC;
  if (my_items == 0) return;
  allow_dependents();  // the output norm may launch now (it waits for this kernel's end)

  // Step s reads input buffer s % 2 and, when it starts item k, H stage k % 2. The prologue
  // issues the first item's H before waiting for the conv kernel (which never writes H), then its
  // first inputs, in one commit group.
  const int grid = int(gridDim.x);
  RowsItem w = rows_item<HT, ORDERED>(p, int(blockIdx.x), item_slot<ORDERED>(p, int(blockIdx.x)), tx, ty);
  int slot_ahead = item_slot<ORDERED>(p, int(blockIdx.x) + grid);  // the next item's
  if constexpr (kStageH) copy_h<HT, VEC>(p, w, ty, hstage);
  wait_for_previous();  // the conv kernel's qkv and gates
  copy_row_inputs(p, w, 0, m.kr, in);
  __pipeline_commit();

  int step = 0;
  for (int k = 0; k < my_items; ++k) {
    HT* hlive = reinterpret_cast<HT*>(p.h + w.h_off);
    RowsItem next = w;
    HRegs<HT, RPT, VEC> H;

    for (int t = 0; t < R; ++t, ++step) {
      // The copies of the next step, before waiting for this one's (two steps in flight): its
      // buffers were last read in step - 1, which every thread finished before that step's last
      // barrier.
      const bool item_ahead = t + 1 == R && k + 1 < my_items;  // the next step starts the next item
      float* next_in = in + ((step + 1) % kRowsStages) * m.in_stride;
      if (t + 1 < R) {
        copy_row_inputs(p, w, t + 1, m.kr, next_in);
      } else if (item_ahead) {
        next = rows_item<HT, ORDERED>(p, int(blockIdx.x) + (k + 1) * grid, slot_ahead, tx, ty);
        slot_ahead = item_slot<ORDERED>(p, int(blockIdx.x) + (k + 2) * grid);
        copy_row_inputs(p, next, 0, m.kr, next_in);
        if constexpr (kStageH) copy_h<HT, VEC>(p, next, ty, hstage + ((k + 1) % kRowsStages) * stage_elems);
      }
      __pipeline_commit();
      __pipeline_wait_prior(1);  // this step's copies (this thread's) have landed
      __syncthreads();           // ... and everyone's

      const float* sq = in + (step % kRowsStages) * m.in_stride;
      const float* sk = sq + m.kr;
      const float* sv = sk + m.kr;
      const float* sgb = sv + TJ;
      const size_t row = size_t(w.b) * R + t;

      if (t == 0) {
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
          const int i = ty * RPT + r;
          if (w.owner && i < kd) {
            if constexpr (kStageH)
              H.load(r, hstage + (k % kRowsStages) * stage_elems + (size_t(r) * blockDim.x + stage_lane(tid)) * VEC);
            else H.load(r, hlive + size_t(i) * vd);
          } else {
            H.clear(r);
          }
        }
      }

      float hk[VEC];  // H^T k: this thread's rows in order, then the tile's (gdn_rows_threads.cuh)
#pragma unroll
      for (int e = 0; e < VEC; ++e) hk[e] = 0.0f;
#pragma unroll
      for (int r0 = 0; r0 < RPT; r0 += 4) {
        const float4 k4 = thread_rows4<RPT>(sk, ty, p.ty_n, r0);
        const float kx[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
        for (int r = r0; r < r0 + 4; ++r) {
          if (ty * RPT + r < kd) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) hk[e] = __fmaf_rn(H.get(r, e), kx[r - r0], hk[e]);
          }
        }
      }
      rows_sum_publish<VEC>(hk, p, th, part);
      if (!SSM_DEVICE_MUTANT(p, kMutMissingBarrier)) __syncthreads();  // mutant (bug class 18): no barrier
      rows_sum_collect<VEC>(hk, p, th, part);

      const float g = sgb[0], beta = sgb[1];
      float vn[VEC], po[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {  // zero off the owned columns: their H stays zero
        vn[e] = w.owner ? __fmul_rn(__fsub_rn(sv[jl + e], __fmul_rn(g, hk[e])), beta) : 0.0f;
        po[e] = 0.0f;
      }
      HT* inter = t < n_inter ? reinterpret_cast<HT*>(p.h_inter + w.inter_off + size_t(t) * p.h_pitch) : nullptr;
#pragma unroll
      for (int r0 = 0; r0 < RPT; r0 += 4) {
        const float4 k4 = thread_rows4<RPT>(sk, ty, p.ty_n, r0), q4 = thread_rows4<RPT>(sq, ty, p.ty_n, r0);
        const float kx[4] = {k4.x, k4.y, k4.z, k4.w}, qx[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
        for (int r = r0; r < r0 + 4; ++r) {
          const int i = ty * RPT + r;
          if (i < kd) {
            float x[VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              x[e] = __fmaf_rn(kx[r - r0], vn[e], __fmul_rn(g, H.get(r, e)));
              // mutant (bug class 9): a clamp the math does not have (before the rounding, which
              // is monotonic and keeps +-1024: the same as after it)
              if (SSM_DEVICE_MUTANT(p, kMutHStoreClamp)) x[e] = fminf(fmaxf(x[e], -1024.0f), 1024.0f);
            }
            H.set_row(r, x);
#pragma unroll
            for (int e = 0; e < VEC; ++e) po[e] = __fmaf_rn(H.get(r, e), qx[r - r0], po[e]);
            if (inter && w.owner) H.store(r, inter + size_t(i) * vd);
          }
        }
      }
      rows_sum_publish<VEC>(po, p, th, part2);  // o = H^T q, the same way
      __syncthreads();  // the H^T q partials are written

      if (w.owner && ty == 0) {
        rows_sum_collect<VEC>(po, p, th, part2);
        float o[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) o[e] = __fmul_rn(po[e], p.qscale);
        store_vec<VEC>(p.o + row * size_t(p.nv) * vd + size_t(w.vh) * vd + w.jt + jl, o);
      }
    }

    if (w.owner) {
#pragma unroll
      for (int r = 0; r < RPT; ++r)
        if (ty * RPT + r < kd) H.store(r, hlive + size_t(ty * RPT + r) * vd);
    }
    w = next;
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
  const RowsSmem m = rows_smem(p, threads, 32 / VEC, VEC, kStageH ? int(sizeof(HT)) * VEC : 0, kRowsStages);
  return sizeof(float) * size_t(m.floats);  // FP32, kd = vd = 128: 69 KB; two CTAs per SM
}

template <typename HT, int VEC, int MINB>
void launch_t(const RowsParams& p, int threads, cudaStream_t s) {
  const size_t smem = rows_smem_bytes<HT, VEC>(p, threads);
  const bool one_row = runs_one_row(p);
  Schedule* order = current_schedule();
  // the shipped instance, or under a perturbed schedule the ORDERED one (cuda/block_order.cuh)
  const OrderedKernel<RowsParams> k =
      one_row ? OrderedKernel<RowsParams>{&gdn_rows_kernel<HT, VEC, MINB, true, false>,
                                          &gdn_rows_kernel<HT, VEC, MINB, true, true>}
              : OrderedKernel<RowsParams>{&gdn_rows_kernel<HT, VEC, MINB, false, false>,
                                          &gdn_rows_kernel<HT, VEC, MINB, false, true>};
  void (*fn)(RowsParams) = order ? k.ordered : k.shipped;
  const void* kernel = reinterpret_cast<const void*>(fn);
  const int items = p.B * p.nv * p.ntiles;
  int grid = std::min(items, resident_ctas(kernel, threads, smem));
  RowsParams q = p;
  if (order) {  // perturbed: the items in a seeded order, on fewer CTAs
    const Schedule::Plan plan = order->next(unsigned(items));
    q.order = BlockOrder{unsigned(items), unsigned(items), 1, 0, plan.mul, plan.add};
    grid = int(order->persistent_grid(unsigned(grid)));
  }
  launch_dependent("gdn_rows_kernel", fn, dim3(unsigned(grid)), dim3(unsigned(threads)), smem, s, q);
}

std::atomic<int> forced_rows_ctas{0};

// FP16, VEC = 4: the 4-CTA twin when the 2-CTA grid cannot hold every item at once (B = 32 decode
// of qwen3-next-80b, H200: 1564 against 1716 us per step; at B = 1, where every item already runs
// at once, the 2-CTA kernel is the faster, 269 against 284 us).
void launch_f16_vec4(const RowsParams& p, int threads, cudaStream_t s) {
  int ctas = forced_rows_ctas.load();
  if (ctas == 0) {
    const void* two = reinterpret_cast<const void*>(&gdn_rows_kernel<__half, 4, 2, false, false>);
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
  p.ty_groups = L.ty_groups;
  p.tx_pad = L.tx_pad;
  p.tj = L.tj;
  p.ntiles = L.ntiles;
  p.in_vec4 = p.kd % 4 == 0 && p.vd % 4 == 0 && reinterpret_cast<uintptr_t>(p.qkv) % 16 == 0 &&
              reinterpret_cast<uintptr_t>(p.gb) % 8 == 0;
  if (h_f16) {
    if (L.vec == 4) launch_f16_vec4(p, L.threads, stream);
    else launch_t<__half, 1, 2>(p, L.threads, stream);
  } else {
    if (L.vec == 4) launch_t<float, 4, 2>(p, L.threads, stream);
    else launch_t<float, 1, 2>(p, L.threads, stream);
  }
}

}  // namespace ssm::cuda
