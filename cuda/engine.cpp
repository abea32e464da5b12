// Op sequencing of the CUDA implementation (see engine.h). Kernel launches live in the
// kernel-family files; this file decides what runs where, in which order, on which stream.
#include "cuda/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "core/host_copies.h"
#include "core/state_digest.h"
#include "cuda/check.h"
#include "cuda/conv.h"
#include "cuda/gdn_decode.h"
#include "cuda/gdn_output_norm.h"
#include "cuda/gdn_verify_wy.h"
#include "cuda/mamba2_output_norm.h"
#include "cuda/mamba2_rows.h"
#include "cuda/mutant_bits.h"
#include "cuda/ple_rows.h"
#include "cuda/region_digest.h"
#include "cuda/to_f16.h"

namespace ssm::cuda {

namespace {
size_t align4(size_t floats) { return (floats + 3) / 4 * 4; }  // 16-byte aligned regions
}  // namespace

Engine::Engine() {
  SSM_CUDA(cudaEventCreateWithFlags(&main_done_, cudaEventDisableTiming));
  int dev = 0;
  SSM_CUDA(cudaGetDevice(&dev));
  SSM_CUDA(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev));
}

Engine::~Engine() {
  if (released_) *reinterpret_cast<volatile unsigned long long*>(released_) = ~0ull;  // let paused copies run
  cudaDeviceSynchronize();
  if (released_) cudaFreeHost(released_);
  for (cudaEvent_t e : slot_ready_) cudaEventDestroy(e);
  if (main_done_) cudaEventDestroy(main_done_);
}  // the buffers are freed in main_'s order, then the streams go (they are declared first)

void Engine::create_pool(const Model& model, const PoolConfig& cfg) {
  model.validate();
  cfg.validate();
  for (const LayerSpec& l : model.spec.layers) {
    if (!l.numerics.is_contract())
      throw std::invalid_argument(l.name() + ": ssmcheck's CUDA kernels implement the contract's numerics only "
                                  "(--gates clamped --f16-store saturate --f16-rows stored)");
  }
  synchronize();
  for (cudaEvent_t e : slot_ready_) cudaEventDestroy(e);
  slot_ready_.clear();
  pool_ = DevicePool();  // free the old pool first
  readback_ = DeviceBuffer();  // sized for the new pool at its first read (its pinned copy is kept)
  model_ = model;
  contract_ = Contract(model.spec, cfg);
  pool_ = DevicePool(model, cfg, main_);
  slot_ready_.resize(size_t(cfg.max_slots) + 1);
  for (cudaEvent_t& e : slot_ready_) SSM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  pending_.assign(size_t(cfg.max_slots) + 1, false);
  ple_live_.assign(size_t(cfg.max_slots) + 1, 0);
  ple_checkpoint_.assign(size_t(cfg.max_slots) + 1, 0);
  ple_saved_.assign(size_t(cfg.snapshot_slots), 0);
  ticket_.assign(size_t(cfg.max_slots) + 1, 0);
  int64_t most = 0;
  for (const LayerSpec& l : model.spec.layers) most = std::max(most, l.h_elems());
  convert_ = DeviceBuffer(size_t(most) * 4, "convert scratch", main_);
  // the pinned copies only grow, so a campaign's pool per case rarely allocates them; growing here,
  // after synchronize, frees no memory a paused copy still waits on
  host_readback_.grow(readback_bytes());
  const size_t digest_bytes = export_fields_most() * sizeof(unsigned long long);
  digests_ = DeviceBuffer(digest_bytes, "state digests", main_);
  host_digests_.grow(digest_bytes);
}

size_t Engine::h_bytes(int l, DType d) const {
  return size_t(model_.spec.layers[size_t(l)].h_elems()) * dtype_size(d);
}

void Engine::pause_async_copies(bool on) {
  if (on && !released_) {
    SSM_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&released_), sizeof(unsigned long long), cudaHostAllocMapped));
    *released_ = issued_;
    SSM_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&released_dev_), released_, 0));
  }
  if (!on) release_until(issued_);
  pause_ = on;
}

void Engine::release_until(unsigned long long ticket) {
  if (!released_) return;
  volatile unsigned long long* r = released_;
  if (*r < ticket) *r = ticket;
}

void Engine::synchronize() {
  release_until(issued_);
  SSM_CUDA(cudaStreamSynchronize(main_));
  SSM_CUDA(cudaStreamSynchronize(copy_));
}

void Engine::reserve(DeviceBuffer& buf, size_t bytes, const char* name) {
  if (buf.get() && buf.bytes() >= bytes) return;
  // the old buffer may still be in use on either stream: synchronize (which releases paused async
  // copies first), so a reader that skips its wait finds the copy done, deterministically (the
  // growth of scratch depends on the ops alone)
  synchronize();
  buf = DeviceBuffer(std::max(bytes, buf.bytes() * 2), name, main_);
}

void Engine::reserve_host(size_t in_bytes, size_t out_bytes) {
  for (auto [buf, bytes] : {std::pair<PinnedBuffer*, size_t>{&host_in_, in_bytes}, {&host_out_, out_bytes}})
    if (bytes > buf->bytes()) {
      synchronize();  // cudaFreeHost synchronises the device: release paused copies first
      buf->grow(std::max(bytes, buf->bytes() * 2));
    }
}

// ---- async ordering -------------------------------------------------------------------------

void Engine::run_async(int slot, const std::vector<CopyDesc>& list) {
  SSM_CUDA(cudaEventRecord(main_done_, main_));  // the copies read what main wrote so far
  SSM_CUDA(cudaStreamWaitEvent(copy_, main_done_, 0));
  ticket_[size_t(slot)] = ++issued_;
  if (pause_) launch_wait_released(released_dev_, issued_, copy_);
  launch_copies(list, copy_);
  SSM_CUDA(cudaEventRecord(slot_ready_[size_t(slot)], copy_));
  pending_[size_t(slot)] = true;
}

void Engine::wait_async(int slot) {
  if (!pending_[size_t(slot)]) return;
  release_until(ticket_[size_t(slot)]);  // a paused copy runs now that its reader waits for it
  SSM_CUDA(cudaStreamWaitEvent(main_, slot_ready_[size_t(slot)], 0));
  pending_[size_t(slot)] = false;
}

// ---- staging ----------------------------------------------------------------------------------

namespace {
// Width of a layer's per-token input kept in LayerRows::*member (0 when the kind has none).
int64_t input_width(const LayerSpec& s, std::vector<float> LayerRows::*member) {
  for (const InputField& f : s.inputs())
    if (f.member == member) return f.width;
  return 0;
}
}  // namespace

void Engine::stage_inputs(const std::vector<int>& pool_slots, const std::vector<StepInputs>& in, int rows) {
  const int B = int(pool_slots.size());
  const size_t R = size_t(rows);
  size_t off = align4(size_t(B));  // the slot table comes first
  size_t out_off = 0;
  io_off_.clear();
  size_t most_qkv = 0, most_gb = 0, most_o = 0;
  for (const LayerSpec& s : model_.spec.layers) {
    LayerIo o{};
    const size_t n = size_t(B) * R;
    for (const InputField& f : s.inputs()) {  // the kind's inputs, in order (core/layer_geometry.cpp)
      o.in.push_back(off);
      off += align4(n * size_t(f.width));
    }
    o.out = out_off;
    out_off += align4(n * size_t(s.out_dim()));
    o.ple_out = out_off;
    out_off += align4(n * size_t(s.ple.channels));
    io_off_.push_back(o);
    most_qkv = std::max(most_qkv, n * size_t(s.conv_dim()));
    most_gb = std::max(most_gb, n * size_t(input_width(s, &LayerRows::a)) * 2);  // a gate pair per head
    most_o = std::max(most_o, n * size_t(s.out_dim()));
  }
  reserve(io_, off * 4, "io scratch");
  reserve(out_, out_off * 4, "out scratch");
  reserve(qkv_, most_qkv * 4, "qkv scratch");
  reserve(o_, most_o * 4, "o scratch");
  reserve(gb_, most_gb * 4, "gate scratch");
  reserve_host(off * 4, out_off * 4);

  std::memcpy(host_in_.get(), pool_slots.data(), size_t(B) * sizeof(int));
  float* h = host_in_.as<float>();
  for (size_t l = 0; l < model_.spec.layers.size(); ++l) {
    const std::vector<InputField> fields = model_.spec.layers[l].inputs();
    for (int b = 0; b < B; ++b) {
      const LayerRows& r = in[size_t(b) % in.size()].layers[l];
      const size_t row0 = size_t(b) * R;
      for (size_t i = 0; i < fields.size(); ++i) {
        const std::vector<float>& v = r.*(fields[i].member);
        std::memcpy(h + io_off_[l].in[i] + row0 * size_t(fields[i].width), v.data(), v.size() * 4);
      }
    }
  }
  SSM_CUDA(cudaMemcpyAsync(io_.get(), host_in_.get(), off * 4, cudaMemcpyHostToDevice, main_));
  batch_ = B;
}

const float* Engine::staged(int l, std::vector<float> LayerRows::*member) const {
  const std::vector<InputField> fields = model_.spec.layers[size_t(l)].inputs();
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].member == member) return reinterpret_cast<const float*>(io_.get()) + io_off_[size_t(l)].in[i];
  return nullptr;
}

std::vector<StepOutputs> Engine::download_outputs(int rows) {
  size_t total = 0;
  for (size_t l = 0; l < model_.spec.layers.size(); ++l)
    total = io_off_[l].ple_out + align4(size_t(batch_) * size_t(rows) * size_t(model_.spec.layers[l].ple.channels));
  SSM_CUDA(cudaMemcpyAsync(host_out_.get(), out_.get(), total * 4, cudaMemcpyDeviceToHost, main_));
  SSM_CUDA(cudaStreamSynchronize(main_));
  const float* h = host_out_.as<const float>();
  std::vector<StepOutputs> outs;
  outs.resize(size_t(batch_));
  for (int b = 0; b < batch_; ++b) {
    StepOutputs& o = outs[size_t(b)];
    o.rows = rows;
    for (size_t l = 0; l < model_.spec.layers.size(); ++l) {
      const size_t n = size_t(rows) * size_t(model_.spec.layers[l].out_dim());
      const float* src = h + io_off_[l].out + size_t(b) * n;
      o.layers.emplace_back(src, src + n);
      const size_t np = size_t(rows) * size_t(model_.spec.layers[l].ple.channels);
      const float* ple = h + io_off_[l].ple_out + size_t(b) * np;
      o.ple.emplace_back(ple, ple + np);
    }
  }
  return outs;
}

// ---- the row-consuming ops --------------------------------------------------------------------

void Engine::enqueue_layer(int l, int rows, int n_inter, VerifyArm arm, bool h_f16, char* h, size_t h_pitch) {
  const LayerSpec& s = model_.spec.layers[size_t(l)];
  const LayerPool& lp = pool_.layer(l);
  const int* slots = reinterpret_cast<const int*>(io_.get());
  const bool mamba2 = s.kind == LayerKind::mamba2;  // the one dispatch point on the layer kind
  if (s.ple.hosted()) ple_launch_rows(l, rows);  // independent of the layer's own math

  ConvParams cp{};
  cp.slots = slots;
  cp.conv = reinterpret_cast<float*>(lp.conv.get());
  cp.conv_inter = reinterpret_cast<float*>(lp.conv_intermediates.get());
  cp.conv_pitch = lp.conv_pitch;
  cp.conv_cap = pool_.config().conv_capacity;
  cp.x = staged(l, &LayerRows::x);
  cp.a = staged(l, &LayerRows::a);
  cp.b = staged(l, &LayerRows::b);
  cp.conv_w = reinterpret_cast<const float*>(lp.conv_w.get());
  cp.conv_bias = s.conv_bias ? reinterpret_cast<const float*>(lp.conv_bias.get()) : nullptr;
  cp.A_log = reinterpret_cast<const float*>(lp.A_log.get());
  cp.dt_bias = reinterpret_cast<const float*>(lp.dt_bias.get());
  cp.qkv = reinterpret_cast<float*>(qkv_.get());
  cp.gb = reinterpret_cast<float*>(gb_.get());
  cp.B = batch_;
  cp.R = rows;
  cp.n_inter = n_inter;
  cp.conv_dim = s.conv_dim();
  cp.d_conv = s.d_conv;
  cp.norm_heads = mamba2 ? 0 : 2 * s.nk;
  cp.norm_width = mamba2 ? 0 : s.kd;
  cp.mamba2 = mamba2;
  cp.gate_heads = mamba2 ? s.nh : s.nv;
  cp.dt_min = s.dt_min;
  cp.dt_max = s.dt_max;
  cp.mutants = device_mutant_bits();
  launch_conv(cp, main_, !h_widened_);

  const int min_ctas = 2 * sm_count_;
  float* out = reinterpret_cast<float*>(out_.get()) + io_off_[size_t(l)].out;
  if (mamba2) {
    Mamba2RowsParams mp{};
    mp.slots = slots;
    mp.inter_first = pool_.inter_first_device();
    mp.h = h;
    mp.h_pitch = h_pitch;
    mp.h_inter = lp.h_intermediates.get();
    mp.xbc = cp.qkv;
    mp.gates = cp.gb;
    mp.D = reinterpret_cast<const float*>(lp.D.get());
    mp.y = reinterpret_cast<float*>(o_.get());
    mp.B = batch_;
    mp.R = rows;
    mp.n_inter = SSM_MUTANT("cuda_verify_no_h_intermediates") ? 0 : n_inter;  // mutant (bug class 1)
    mp.nh = s.nh; mp.hp = s.hp; mp.ns = s.ns; mp.ng = s.ng;
    mp.mutants = device_mutant_bits();
    launch_mamba2_rows(mp, h_f16, sm_count_, main_);  // both verify arms: Mamba-2 has no WY form

    Mamba2NormParams np{};
    np.y = mp.y;
    np.z = staged(l, &LayerRows::z);
    np.norm_w = reinterpret_cast<const float*>(lp.norm_w.get());
    np.out = out;
    np.rows = batch_ * rows;
    np.d_inner = s.d_inner();
    np.ng = s.ng;
    np.eps = s.eps;
    np.norm_before_gate = s.norm_before_gate;
    launch_mamba2_output_norm(np, main_);
    return;
  }

  RowsParams rp{};
  rp.slots = slots;
  rp.inter_first = pool_.inter_first_device();
  rp.h = h;
  rp.h_pitch = h_pitch;
  rp.h_inter = lp.h_intermediates.get();
  rp.qkv = cp.qkv;
  rp.gb = cp.gb;
  rp.o = reinterpret_cast<float*>(o_.get());
  rp.B = batch_;
  rp.R = rows;
  rp.n_inter = SSM_MUTANT("cuda_verify_no_h_intermediates") ? 0 : n_inter;  // mutant (bug class 1)
  rp.mutants = device_mutant_bits();
  rp.nk = s.nk; rp.nv = s.nv; rp.kd = s.kd; rp.vd = s.vd;
  rp.qscale = float(1.0 / std::sqrt(double(s.kd)));
  if (arm == VerifyArm::wy && rows <= kWyMaxRows) launch_gdn_verify_wy(rp, h_f16, min_ctas, main_);
  else launch_gdn_rows(rp, h_f16, min_ctas, main_);

  NormParams np{};
  np.o = rp.o;
  np.z = staged(l, &LayerRows::z);
  np.norm_w = reinterpret_cast<const float*>(lp.norm_w.get());
  np.out = out;
  np.rows = batch_ * rows;
  np.nv = s.nv;
  np.vd = s.vd;
  np.eps = s.eps;
  np.sigmoid_gate = s.output_gate == OutputGate::sigmoid;
  launch_gdn_output_norm(np, main_);
}

void Engine::ple_launch_rows(int l, int rows) {
  const LayerSpec& s = model_.spec.layers[size_t(l)];
  const LayerPool& lp = pool_.layer(l);
  PleRowsParams p{};
  p.slots = reinterpret_cast<const int*>(io_.get());
  p.conv = reinterpret_cast<float*>(lp.ple_conv.get());
  p.snap = reinterpret_cast<float*>(lp.ple_snapshot_conv.get());
  p.snaps = lp.ple_snaps;
  p.n_snap = ple_snaps_;
  p.history = reinterpret_cast<float*>(lp.ple_history.get());
  p.ids = reinterpret_cast<float*>(lp.ple_ids.get());
  p.x = staged(l, &LayerRows::ple_x);
  p.tokens = staged(l, &LayerRows::ple_tokens);
  p.w = reinterpret_cast<const float*>(lp.ple_w.get());
  p.out = reinterpret_cast<float*>(out_.get()) + io_off_[size_t(l)].ple_out;
  p.B = batch_;
  p.R = rows;
  p.C = s.ple.channels;
  p.conv_rows = s.ple.conv_rows();
  p.K = s.ple.k_size;
  p.dilation = s.ple.dilation;
  p.H = s.ple.history_len();
  launch_ple_rows(p, main_);
}

std::vector<CopyDesc> Engine::ple_fresh_copies(const std::vector<int>& pool_slots) {
  std::vector<CopyDesc> v;
  if (!model_.spec.hosts_ple()) return v;
  for (int s : pool_slots) {
    if (ple_live_[size_t(s)]) continue;  // present (or already listed: a slot appears once per batch but the dummy)
    for (int l = 0; l < pool_.layers(); ++l) {
      const LayerPool& lp = pool_.layer(l);
      if (!model_.spec.layers[size_t(l)].ple.hosted()) continue;
      v.push_back({lp.ple_fresh_history.get(), pool_.ple_history(l, s), lp.ple_history_pitch});
      v.push_back({nullptr, pool_.ple_conv(l, s), lp.ple_conv_pitch});
    }
    ple_live_[size_t(s)] = 1;
  }
  return v;
}

void Engine::ple_restore_copies(int slot, int n, bool to_checkpoint, std::vector<CopyDesc>& v) const {
  const SlotMeta& m = contract_.slot(slot);
  for (int l = 0; l < pool_.layers(); ++l) {
    const LayerSpec& s = model_.spec.layers[size_t(l)];
    if (!s.ple.hosted()) continue;
    const LayerPool& lp = pool_.layer(l);
    char* hist = to_checkpoint ? pool_.ple_history_checkpoint(l, slot) : pool_.ple_history(l, slot);
    char* conv = to_checkpoint ? pool_.ple_conv_checkpoint(l, slot) : pool_.ple_conv(l, slot);
    if (n == 0) {
      if (!to_checkpoint && m.has_conv_checkpoint && ple_checkpoint_[size_t(slot)]) {
        v.push_back({pool_.ple_history_checkpoint(l, slot), hist, lp.ple_history_pitch});
        v.push_back({pool_.ple_conv_checkpoint(l, slot), conv, lp.ple_conv_pitch});
      }
      continue;
    }
    if (!to_checkpoint && SSM_MUTANT("cuda_ple_not_rolled_back")) continue;  // mutant (bug class 15)
    v.push_back({pool_.ple_snapshot_conv(l, slot, n), conv, lp.ple_conv_pitch});
    const size_t H = size_t(s.ple.history_len());
    if (!to_checkpoint && SSM_MUTANT("cuda_ple_history_truncated")) {
      // mutant (bug class 15): the post-verify history with its last k - n ids dropped, EOS in front
      const size_t drop = std::min(H, size_t(m.last_verify_k - n));
      v.push_back({lp.ple_fresh_history.get(), hist, drop * 4});
      v.push_back({pool_.ple_ids_at(l, slot, m.last_verify_k), hist + drop * 4, (H - drop) * 4});
      continue;
    }
    v.push_back({pool_.ple_ids_at(l, slot, n), hist, H * 4});  // the pre-verify history + the first n tokens
  }
}

void Engine::enqueue_rows(int rows, int n_inter, VerifyArm arm, bool h_f16) {
  for (int l = 0; l < pool_.layers(); ++l)
    enqueue_layer(l, rows, n_inter, arm, h_f16, pool_.layer(l).h.get(), pool_.layer(l).h_pitch);
}

std::vector<StepOutputs> Engine::run_batch(OpKind op, const std::vector<int>& slots, int k, VerifyArm arm,
                                           const std::vector<StepInputs>& in) {
  contract_.check_batch(op, slots, k, in);
  std::vector<int> dev(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) dev[i] = slots[i] == kPadRow ? contract_.dummy_slot() : slots[i];
  if (SSM_MUTANT("cuda_pad_row_writes_claimed"))  // mutant (bug class 11): padding rows on a claimed slot
    for (int& d : dev)
      if (d == contract_.dummy_slot())
        for (int s = 0; s < contract_.pool().max_slots; ++s)
          if (contract_.slot(s).claimed && std::find(slots.begin(), slots.end(), s) == slots.end()) {
            d = s;
            break;
          }
  // the storage refuses what the contract let through: K-1 intermediates must fit every row's slot
  if (op == OpKind::verify && k >= 2)
    for (int s : dev)
      for (int l = 0; l < pool_.layers(); ++l) {
        pool_.h_intermediate(l, s, k - 2);
        pool_.conv_intermediate(l, s, k - 2);
      }
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] != kPadRow) wait_async(slots[i]);
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] != kPadRow && contract_.needs_to_f16(slots[i])) {
      if (!SSM_MUTANT("cuda_to_f16_skipped")) convert_to_f16(slots[i]);  // mutant (bug class 6)
      contract_.on_to_f16(slots[i]);
    }
  const bool f16 = contract_.pool().h_mode != HMode::f32;
  for (int s : dev)  // the kernel about to run must match the dtype every row's h holds
    if (contract_.slot(s).h_is_f16 != f16)
      throw std::logic_error(std::string(op_name(op)) + ": slot " + std::to_string(s) + " h dtype does not match the " +
                             (f16 ? "FP16" : "FP32") + " kernel");
  launch_copies(ple_fresh_copies(dev), main_);
  stage_inputs(dev, in, k);
  ple_snaps_ = op == OpKind::verify ? k : 0;
  enqueue_rows(k, op == OpKind::verify ? k - 1 : 0, op == OpKind::verify ? arm : VerifyArm::exact, f16);
  ple_snaps_ = 0;
  std::vector<StepOutputs> outs = download_outputs(k);
  if (op == OpKind::verify)
    for (int s : slots)
      if (s != kPadRow) contract_.on_verify(s, k);
  return outs;
}

std::vector<StepOutputs> Engine::decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) {
  return run_batch(OpKind::decode, slots, 1, VerifyArm::exact, in);
}

std::vector<StepOutputs> Engine::verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                        const std::vector<StepInputs>& in) {
  return run_batch(OpKind::verify, slots, k, arm, in);
}

StepOutputs Engine::prefill(int slot, const StepInputs& in) {
  contract_.check_prefill(slot, in);
  wait_async(slot);
  const HMode mode = contract_.pool().h_mode;
  const int T = in.rows;
  launch_copies(ple_fresh_copies({slot}), main_);
  stage_inputs({slot}, {in}, T);
  h_widened_ = mode == HMode::f16_pool || contract_.prefill_widens(slot);  // issue 41
  if (mode == HMode::f16_pool) {
    // widen into the slot's FP32 stage, run there, narrow back with the converter
    char* stage = pool_.stage(slot);
    for (int l = 0; l < pool_.layers(); ++l) {
      const size_t n = size_t(model_.spec.layers[size_t(l)].h_elems());
      if (!SSM_MUTANT("cuda_f16_pool_prefill_no_widen"))  // mutant (bug class 7)
        launch_widen_f16(reinterpret_cast<const uint16_t*>(pool_.h(l, slot)), reinterpret_cast<float*>(stage), n, main_);
      enqueue_layer(l, T, 0, VerifyArm::exact, false, pool_.stage_buffer().get(), pool_.stage_pitch());
      launch_narrow_f16(reinterpret_cast<const float*>(stage), reinterpret_cast<uint16_t*>(pool_.h(l, slot)), n, main_);
    }
  } else {
    if (contract_.prefill_widens(slot)) {  // f16 mode: FP16 h back to FP32, exactly
      for (int l = 0; l < pool_.layers(); ++l) {
        const size_t n = size_t(model_.spec.layers[size_t(l)].h_elems());
        SSM_CUDA(cudaMemcpyAsync(convert_.get(), pool_.h(l, slot), n * 2, cudaMemcpyDeviceToDevice, main_));
        launch_widen_f16(reinterpret_cast<const uint16_t*>(convert_.get()), reinterpret_cast<float*>(pool_.h(l, slot)),
                         n, main_);
      }
    }
    enqueue_rows(T, 0, VerifyArm::exact, false);
  }
  h_widened_ = false;
  StepOutputs out = std::move(download_outputs(T)[0]);
  contract_.on_prefill(slot);
  return out;
}

void Engine::convert_to_f16(int slot) {
  // out of place: FP32 slot -> FP16 scratch -> first half of the slot
  for (int l = 0; l < pool_.layers(); ++l) {
    const size_t n = size_t(model_.spec.layers[size_t(l)].h_elems());
    launch_narrow_f16(reinterpret_cast<const float*>(pool_.h(l, slot)), reinterpret_cast<uint16_t*>(convert_.get()), n,
                      main_);
    SSM_CUDA(cudaMemcpyAsync(pool_.h(l, slot), convert_.get(), n * 2, cudaMemcpyDeviceToDevice, main_));
  }
}

void Engine::to_f16(int slot) {
  contract_.check_to_f16(slot);
  wait_async(slot);
  convert_to_f16(slot);
  contract_.on_to_f16(slot);
}

// ---- slots and copies -------------------------------------------------------------------------

int Engine::alloc(int min_capacity) {
  const int slot = contract_.check_alloc(min_capacity);
  wait_async(slot);
  const PoolConfig& cfg = contract_.pool();
  std::vector<CopyDesc> zero;
  for (int l = 0; l < pool_.layers(); ++l) {
    const LayerPool& lp = pool_.layer(l);
    if (!SSM_MUTANT("cuda_alloc_no_zero")) zero.push_back({nullptr, pool_.h(l, slot), lp.h_pitch});  // mutant (class 11)
    zero.push_back({nullptr, pool_.conv(l, slot), lp.conv_pitch});
    zero.push_back({nullptr, pool_.h_checkpoint(l, slot), lp.h_pitch});
    zero.push_back({nullptr, pool_.conv_checkpoint(l, slot), lp.conv_pitch});
    if (cfg.capacity(slot) > 0)
      zero.push_back({nullptr, pool_.h_intermediate(l, slot, 0), lp.h_pitch * size_t(cfg.capacity(slot))});
    if (cfg.conv_capacity > 0)
      zero.push_back({nullptr, pool_.conv_intermediate(l, slot, 0), lp.conv_pitch * size_t(cfg.conv_capacity)});
  }
  if (cfg.h_mode == HMode::f16_pool) zero.push_back({nullptr, pool_.stage(slot), pool_.stage_pitch()});
  launch_copies(zero, main_);
  contract_.on_alloc(slot);
  ple_live_[size_t(slot)] = ple_checkpoint_[size_t(slot)] = 0;  // absent until the first row
  return slot;
}

void Engine::release(int slot) {
  contract_.check_claimed("release", slot);
  contract_.on_release(slot);  // the bytes stay until the next alloc zeroes them
}

std::vector<CopyDesc> Engine::checkpoint_copies(int slot) const {
  const DType d = contract_.slot(slot).h_dtype();
  std::vector<CopyDesc> v;
  for (int l = 0; l < pool_.layers(); ++l) {
    v.push_back({pool_.h(l, slot), pool_.h_checkpoint(l, slot), h_bytes(l, d)});
    // mutant (bug class 8): the conv copy sized zero
    v.push_back({pool_.conv(l, slot), pool_.conv_checkpoint(l, slot),
                 SSM_MUTANT("cuda_checkpoint_conv_zero_bytes") ? 0 : pool_.layer(l).conv_pitch});
  }
  ple_checkpoint_copies(slot, v);
  return v;
}

void Engine::ple_checkpoint_copies(int slot, std::vector<CopyDesc>& v) const {
  for (int l = 0; l < pool_.layers(); ++l) {
    if (!model_.spec.layers[size_t(l)].ple.hosted()) continue;
    const LayerPool& lp = pool_.layer(l);
    v.push_back({pool_.ple_history(l, slot), pool_.ple_history_checkpoint(l, slot), lp.ple_history_pitch});
    v.push_back({pool_.ple_conv(l, slot), pool_.ple_conv_checkpoint(l, slot), lp.ple_conv_pitch});
  }
}

std::vector<CopyDesc> Engine::restore_copies(int slot, int n) const {
  const SlotMeta& m = contract_.slot(slot);
  const DType d = m.h_dtype();
  const int t = SSM_MUTANT("cuda_restore_off_by_one") ? n : n - 1;  // mutant (bug class 2)
  std::vector<CopyDesc> v;
  for (int l = 0; l < pool_.layers(); ++l) {
    const size_t cb = pool_.layer(l).conv_pitch;
    if (n == 0) {
      if (m.has_h_checkpoint) v.push_back({pool_.h_checkpoint(l, slot), pool_.h(l, slot), h_bytes(l, d)});
      if (m.has_conv_checkpoint) v.push_back({pool_.conv_checkpoint(l, slot), pool_.conv(l, slot), cb});
    } else {
      v.push_back({pool_.h_intermediate(l, slot, t), pool_.h(l, slot), h_bytes(l, d)});
      v.push_back({pool_.conv_intermediate(l, slot, t), pool_.conv(l, slot), cb});
    }
  }
  ple_restore_copies(slot, n == 0 ? 0 : t + 1, false, v);
  return v;
}

void Engine::checkpoint(int slot, bool async) {
  contract_.check_claimed(async ? "checkpoint_async" : "checkpoint", slot);
  const std::vector<CopyDesc> list = checkpoint_copies(slot);
  if (async) {
    run_async(slot, list);
  } else {
    wait_async(slot);
    launch_copies(list, main_);
  }
  contract_.on_checkpoint(slot);
  ple_checkpoint_[size_t(slot)] = ple_live_[size_t(slot)];
}

void Engine::ple_after_restore(int slot, int n) {
  if (n >= 1) ple_live_[size_t(slot)] = 1;  // a verify ran: its snapshots hold a carry
  else if (contract_.slot(slot).has_conv_checkpoint) ple_live_[size_t(slot)] = ple_checkpoint_[size_t(slot)];
}

void Engine::commit(int slot, int n, int k) {
  contract_.check_commit(slot, n, k);
  if (n == k && !SSM_MUTANT("cuda_commit_reads_last_intermediate")) return;  // mutant (bug class 17)
  wait_async(slot);
  launch_copies(restore_copies(slot, n), main_);
  ple_after_restore(slot, n);
}

void Engine::rollback(int slot, int n, bool and_checkpoint) {
  if (SSM_MUTANT("cuda_rollback_partial_on_error") && pool_.layers() > 1 && n >= 1 && contract_.slot(slot).claimed &&
      n - 1 < contract_.pool().capacity(slot) && n - 1 < contract_.pool().conv_capacity) {
    // mutant (bug class 12): layer 0 restored before the op is checked
    std::vector<CopyDesc> first = restore_copies(slot, n);
    first.resize(2);
    wait_async(slot);
    launch_copies(first, main_);
  }
  contract_.check_rollback(and_checkpoint ? OpKind::rollback_and_checkpoint_async : OpKind::rollback, slot, n);
  std::vector<CopyDesc> list = restore_copies(slot, n);
  if (!and_checkpoint) {
    if (!SSM_MUTANT("cuda_async_reader_no_wait")) wait_async(slot);  // mutant (bug class 14)
    launch_copies(list, main_);
    ple_after_restore(slot, n);
    return;
  }
  // checkpoint <- the rolled-back state, copied from the same sources in the same launch
  const SlotMeta& m = contract_.slot(slot);
  const DType d = m.h_dtype();
  for (int l = 0; l < pool_.layers(); ++l) {
    const size_t cb = pool_.layer(l).conv_pitch;
    if (n == 0) {  // a present checkpoint is already the rolled-back state; an absent one takes live
      if (!m.has_h_checkpoint) list.push_back({pool_.h(l, slot), pool_.h_checkpoint(l, slot), h_bytes(l, d)});
      if (!m.has_conv_checkpoint) list.push_back({pool_.conv(l, slot), pool_.conv_checkpoint(l, slot), cb});
    } else {
      list.push_back({pool_.h_intermediate(l, slot, n - 1), pool_.h_checkpoint(l, slot), h_bytes(l, d)});
      list.push_back({pool_.conv_intermediate(l, slot, n - 1), pool_.conv_checkpoint(l, slot), cb});
    }
  }
  if (n >= 1) {
    ple_restore_copies(slot, n, true, list);
  } else if (!m.has_conv_checkpoint) {  // the checkpoint takes the live carry, as it takes live h and conv
    ple_checkpoint_copies(slot, list);
  }
  run_async(slot, list);
  ple_after_restore(slot, n);
  if (n >= 1 || !m.has_conv_checkpoint) ple_checkpoint_[size_t(slot)] = ple_live_[size_t(slot)];
  contract_.on_checkpoint(slot);
}

void Engine::snapshot_save(int slot, int snap) {
  contract_.check_snapshot(OpKind::snapshot_save, slot, snap);
  wait_async(slot);
  const DType d = contract_.slot(slot).h_dtype();
  std::vector<CopyDesc> v;
  for (int l = 0; l < pool_.layers(); ++l) {
    v.push_back({pool_.h(l, slot), pool_.snapshot_h(l, snap), h_bytes(l, d)});
    v.push_back({pool_.conv(l, slot), pool_.snapshot_conv(l, snap), pool_.layer(l).conv_pitch});
    if (model_.spec.layers[size_t(l)].ple.hosted()) {
      const LayerPool& lp = pool_.layer(l);
      v.push_back({pool_.ple_history(l, slot), pool_.snapshot_ple_history(l, snap), lp.ple_history_pitch});
      v.push_back({pool_.ple_conv(l, slot), pool_.snapshot_ple_conv(l, snap), lp.ple_conv_pitch});
    }
  }
  launch_copies(v, main_);
  contract_.on_snapshot_save(slot, snap);
  ple_saved_[size_t(snap)] = ple_live_[size_t(slot)];
}

void Engine::snapshot_restore(int slot, int snap) {
  contract_.check_snapshot(OpKind::snapshot_restore, slot, snap);
  wait_async(slot);
  const DType d = contract_.slot(slot).h_dtype();
  std::vector<CopyDesc> v;
  for (int l = 0; l < pool_.layers(); ++l) {
    v.push_back({pool_.snapshot_h(l, snap), pool_.h(l, slot), h_bytes(l, d)});
    v.push_back({pool_.snapshot_conv(l, snap), pool_.conv(l, slot), pool_.layer(l).conv_pitch});
    if (model_.spec.layers[size_t(l)].ple.hosted() && ple_saved_[size_t(snap)]) {
      const LayerPool& lp = pool_.layer(l);
      v.push_back({pool_.snapshot_ple_history(l, snap), pool_.ple_history(l, slot), lp.ple_history_pitch});
      v.push_back({pool_.snapshot_ple_conv(l, snap), pool_.ple_conv(l, slot), lp.ple_conv_pitch});
    }
  }
  launch_copies(v, main_);
  ple_live_[size_t(slot)] = ple_saved_[size_t(snap)];
}

// ---- export and test hooks ----------------------------------------------------------------------

namespace {
size_t round_up256(size_t bytes) { return (bytes + 255) / 256 * 256; }  // 16-byte copies, apart
size_t shape_elems(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}
}  // namespace

size_t Engine::readback_bytes() const {
  // the largest export: every field present, FP32, a verify of the largest capacity
  const PoolConfig& cfg = contract_.pool();
  const size_t inter = size_t(cfg.max_capacity());
  size_t state = 0;
  for (int l = 0; l < pool_.layers(); ++l) {
    const LayerSpec& s = model_.spec.layers[size_t(l)];
    state += (2 + inter) * (round_up256(h_bytes(l, DType::f32)) + round_up256(shape_elems(conv_shape(s)) * 4));
    if (s.ple.hosted())  // live, checkpoint and a snapshot per verify row
      state += (3 + inter) *
               (round_up256(shape_elems(ple_history_shape(s)) * 4) + round_up256(shape_elems(ple_conv_shape(s)) * 4));
  }
  if (cfg.h_mode == HMode::f16_pool) state += round_up256(size_t(stage_elems(model_.spec)) * 4);
  // both guard bands of every pool buffer, the scratch and readback_ itself (check_guards)
  const size_t guards = (pool_.buffers().size() + scratch_buffers().size()) * 2 * DeviceBuffer::kGuard;
  return std::max(state, guards);
}

void Engine::read_back(const std::vector<Readback>& reads) {
  size_t total = 0;
  for (const Readback& r : reads) total += round_up256(r.bytes);
  if (total == 0) return;
  if (total > readback_.bytes()) {
    if (readback_.bytes())
      throw std::logic_error("read back of " + std::to_string(total) + " bytes beyond the " +
                             std::to_string(readback_.bytes()) + " sized for this pool");
    const size_t cap = std::max(total, readback_bytes());
    readback_ = DeviceBuffer(cap, "readback staging", main_);
    if (cap > host_readback_.bytes())  // create_pool sized it for the largest read; growing here would
      // free pinned memory, which waits for paused async copies
      throw std::logic_error("read back of " + std::to_string(cap) + " bytes beyond the " +
                             std::to_string(host_readback_.bytes()) + " pinned for this pool");
  }
  std::vector<CopyDesc> gather;
  size_t off = 0;
  for (const Readback& r : reads) {
    gather.push_back(CopyDesc{r.src, readback_.get() + off, r.bytes});
    off += round_up256(r.bytes);
  }
  launch_copies(gather, main_, /*delayable=*/false);
  SSM_CUDA(cudaMemcpyAsync(host_readback_.get(), readback_.get(), off, cudaMemcpyDeviceToHost, main_));
  SSM_CUDA(cudaStreamSynchronize(main_));
  std::vector<size_t> at(reads.size());
  off = 0;
  for (size_t i = 0; i < reads.size(); ++i) {
    at[i] = off;
    off += round_up256(reads[i].bytes);
  }
  run_host_copies(int(reads.size()), total, [&](int i) {
    std::memcpy(reads[size_t(i)].dst, host_readback_.get() + at[size_t(i)], reads[size_t(i)].bytes);
  });
}

std::vector<Engine::ExportField> Engine::export_fields(int slot) const {
  const SlotMeta& m = contract_.slot(slot);
  std::vector<ExportField> v;
  auto add = [&](FieldKind k, int l, int t, DType d, std::vector<int64_t> shape, const void* src) {
    v.push_back(ExportField{FieldKey{k, l, t}, d, std::move(shape), src});
  };
  for (int l = 0; l < pool_.layers(); ++l) {
    const LayerSpec& s = model_.spec.layers[size_t(l)];
    add(FieldKind::h, l, 0, m.h_dtype(), h_shape(s), pool_.h(l, slot));
    add(FieldKind::conv, l, 0, DType::f32, conv_shape(s), pool_.conv(l, slot));
    if (m.has_h_checkpoint) add(FieldKind::h_checkpoint, l, 0, m.h_checkpoint_dtype, h_shape(s), pool_.h_checkpoint(l, slot));
    if (m.has_conv_checkpoint) add(FieldKind::conv_checkpoint, l, 0, DType::f32, conv_shape(s), pool_.conv_checkpoint(l, slot));
    for (int t = 0; t + 1 < m.last_verify_k; ++t) {
      add(FieldKind::h_intermediate, l, t, m.intermediate_dtype, h_shape(s), pool_.h_intermediate(l, slot, t));
      add(FieldKind::conv_intermediate, l, t, DType::f32, conv_shape(s), pool_.conv_intermediate(l, slot, t));
    }
    if (s.ple.hosted()) {
      // each PLE history kind is followed by its conv kind (core/state_fields.h)
      auto carry = [&](FieldKind history, int t, const void* hist, const void* conv) {
        add(history, l, t, DType::f32, ple_history_shape(s), hist);
        add(FieldKind(int(history) + 1), l, t, DType::f32, ple_conv_shape(s), conv);
      };
      if (ple_live_[size_t(slot)]) carry(FieldKind::ple_history, 0, pool_.ple_history(l, slot), pool_.ple_conv(l, slot));
      if (m.has_conv_checkpoint && ple_checkpoint_[size_t(slot)])
        carry(FieldKind::ple_checkpoint_history, 0, pool_.ple_history_checkpoint(l, slot), pool_.ple_conv_checkpoint(l, slot));
      for (int t = 0; t < m.last_verify_k; ++t)
        carry(FieldKind::ple_snapshot_history, t, pool_.ple_ids_at(l, slot, t), pool_.ple_snapshot_conv(l, slot, t));
    }
  }
  if (contract_.pool().h_mode == HMode::f16_pool)
    add(FieldKind::stage, -1, 0, DType::f32, {stage_elems(model_.spec)}, pool_.stage(slot));
  return v;
}

size_t Engine::export_fields_most() const {
  const size_t cap = size_t(contract_.pool().max_capacity());
  size_t n = 1;  // the f16-pool stage
  for (const LayerSpec& s : model_.spec.layers)
    n += 4 + 2 * cap + (s.ple.hosted() ? 4 + 2 * (cap + 1) : 0);  // intermediates K-1 <= cap, snapshots K
  return n;
}

SequenceState Engine::export_rest(int slot) const {
  const SlotMeta& m = contract_.slot(slot);
  SequenceState out;
  out.slot = slot;
  out.last_verify_k = m.last_verify_k;
  out.layers.resize(size_t(pool_.layers()));
  for (LayerState& ls : out.layers) ls.h_is_f16 = m.h_is_f16;
  return out;
}

SequenceState Engine::export_state(int slot) {
  contract_.check_claimed("export", slot);
  wait_async(slot);
  SequenceState none;
  return export_from(slot, none, {}, {});
}

void Engine::export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) {
  contract_.check_claimed("export", slot);
  wait_async(slot);
  state = export_from(slot, state, before, now);
}

SequenceState Engine::export_from(int slot, SequenceState& previous, const FieldDigests& before,
                                  const FieldDigests& now) {
  SequenceState out = export_rest(slot);
  const std::set<FieldKey> carried = carry_unchanged_fields(previous, before, now, out);
  std::map<FieldKey, Tensor> spare = take_fields(previous);  // the changed fields' storage, read into again
  // Every field read is allocated here (or is a changed field's storage of the same dtype and
  // shape, every byte read over) and read back at the end, in one gather (read_back); a
  // tensor's heap storage stays put when the tensor is moved into the state. A large state's
  // tensors are allocated (and zeroed, their first touch) on several threads, as read_back copies
  // them: single-threaded, the two passes over the host memory were most of a real-shape export.
  std::vector<ExportField> fields;
  for (ExportField& f : export_fields(slot))
    if (!carried_as_is(carried, f.key, field_tensor(out, f.key), f.dtype, f.shape)) fields.push_back(std::move(f));
  size_t total = 0;
  for (const ExportField& f : fields) total += shape_elems(f.shape) * dtype_size(f.dtype);
  std::vector<Tensor> tensors(fields.size());
  run_host_copies(int(fields.size()), total, [&](int i) {
    const ExportField& f = fields[size_t(i)];
    const auto old = spare.find(f.key);  // distinct keys: each task moves its own entry
    if (old != spare.end() && old->second.dtype() == f.dtype && old->second.shape() == f.shape)
      tensors[size_t(i)] = std::move(old->second);
    else
      tensors[size_t(i)] = Tensor::zeros(f.dtype, f.shape);
  });
  std::vector<Readback> reads;
  for (size_t i = 0; i < fields.size(); ++i) {
    Tensor& t = field_tensor(out, fields[i].key);
    t = std::move(tensors[i]);
    reads.push_back(Readback{fields[i].src, t.raw(), t.bytes()});
  }
  read_back(reads);
  return out;
}

FieldDigests Engine::field_digests(int slot) {
  contract_.check_claimed("digest", slot);
  wait_async(slot);  // as export_state: what it would return
  const std::vector<ExportField> fields = export_fields(slot);
  const size_t capacity = digests_.bytes() / sizeof(unsigned long long);
  if (fields.size() > capacity)
    throw std::logic_error("state digest of " + std::to_string(fields.size()) + " fields beyond the " +
                           std::to_string(capacity) + " sized for this pool");
  std::vector<DigestRegion> regions;
  for (const ExportField& f : fields) regions.push_back(DigestRegion{f.src, shape_elems(f.shape) * dtype_size(f.dtype)});
  launch_region_digests(regions, reinterpret_cast<unsigned long long*>(digests_.get()), main_);
  SSM_CUDA(cudaMemcpyAsync(host_digests_.get(), digests_.get(), fields.size() * sizeof(unsigned long long),
                           cudaMemcpyDeviceToHost, main_));
  SSM_CUDA(cudaStreamSynchronize(main_));
  // each field: its key, dtype, shape and the device digest of its bytes; then the export's scalars
  FieldDigests d;
  for (size_t i = 0; i < fields.size(); ++i) {
    const ExportField& f = fields[i];
    StateHasher h;
    h.add(int64_t(f.dtype));
    h.add(int64_t(f.shape.size()));
    for (int64_t e : f.shape) h.add(e);
    h.add(int64_t(host_digests_.as<unsigned long long>()[i]));
    d.push_back({f.key, h.digest()});
  }
  d.push_back({FieldKey{FieldKind::rest, -1, 0}, rest_digest(export_rest(slot))});
  return d;
}

std::vector<const DeviceBuffer*> Engine::scratch_buffers() const {
  return {&io_, &out_, &qkv_, &gb_, &o_, &convert_, &readback_, &digests_};
}

std::string Engine::check_guards() {
  // paused copies stay paused (their guards are checked once they ran); everything else is done
  SSM_CUDA(cudaStreamSynchronize(main_));
  bool paused = false;
  for (size_t s = 0; s < pending_.size(); ++s) paused = paused || (pause_ && pending_[s]);
  if (!paused) SSM_CUDA(cudaStreamSynchronize(copy_));
  std::vector<const DeviceBuffer*> all = pool_.buffers();
  for (const DeviceBuffer* b : scratch_buffers()) all.push_back(b);
  // the buffers allocated now (read_back may allocate readback_ itself: its bands are read next time)
  std::vector<const DeviceBuffer*> allocated;
  for (const DeviceBuffer* b : all)
    if (b->guard_before()) allocated.push_back(b);
  std::vector<uint8_t> bands(allocated.size() * 2 * DeviceBuffer::kGuard);
  std::vector<Readback> reads;
  for (size_t i = 0; i < allocated.size(); ++i) {
    uint8_t* at = bands.data() + i * 2 * DeviceBuffer::kGuard;
    reads.push_back(Readback{allocated[i]->guard_before(), at, DeviceBuffer::kGuard});
    reads.push_back(Readback{allocated[i]->guard_after(), at + DeviceBuffer::kGuard, DeviceBuffer::kGuard});
  }
  read_back(reads);
  std::string out;
  for (size_t i = 0; i < allocated.size(); ++i) {
    const uint8_t* at = bands.data() + i * 2 * DeviceBuffer::kGuard;
    out += allocated[i]->guard_damage(at, at + DeviceBuffer::kGuard);
  }
  return out;
}

std::vector<uint8_t> Engine::read_family(int layer, PoolFamily f) {
  synchronize();
  const DeviceBuffer& b = pool_.family(layer, f);
  std::vector<uint8_t> v(b.bytes());
  if (!v.empty()) SSM_CUDA(cudaMemcpy(v.data(), b.get(), v.size(), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace ssm::cuda
