// Op sequencing of the CUDA implementation (see engine.h): the engine's life (streams, events,
// the pool, scratch growth) and the row-consuming ops (decode, verify, prefill, to_f16): their
// checks, waits, conversions and the order of staging, launch and download. The rest of Engine is
// split by concern: engine_inputs.cpp (staging by name), engine_launch.cpp (a layer's kernels),
// engine_ple.cpp (the PLE carry), engine_copies.cpp (the copying ops, async copies and their
// pauses), engine_export.cpp (reading back); import_state.cpp (import).
#include "cuda/engine.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/mutant.h"
#include "cuda/check.h"
#include "cuda/to_f16.h"

namespace ssm::cuda {

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

}  // namespace ssm::cuda
