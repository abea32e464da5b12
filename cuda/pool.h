// The device pool of STATE-MODEL section 5: per layer one allocation per family with a fixed
// slot pitch, a dummy slot (index max_slots) for padding rows, tiered h intermediates, uniform
// conv intermediates, the f16-pool FP32 stage, snapshot slots. Every allocation sits between
// two guard bands of a known byte pattern. Counterpart: reference/pool.cpp.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "cuda/pool_family.h"

namespace ssm::cuda {

// One device allocation (cuda/device_memory.h) with guard bands before and after the usable
// bytes, which start zeroed. Addresses never move. The buffer is freed in the order of the stream
// it was made on, which must outlive it; the owner synchronises any other stream that used it
// before it dies.
class DeviceBuffer {
 public:
  static constexpr size_t kGuard = 256;  // bytes per side; keeps the payload 256-byte aligned
  DeviceBuffer() = default;
  // Allocation, guard bands and zeroing are queued on `stream`: work on `stream` may use the
  // buffer at once, any other stream once `stream` was synchronised (DevicePool does, once).
  DeviceBuffer(size_t bytes, const std::string& name, cudaStream_t stream);
  // The same on the legacy stream, then waits for it: usable from any stream on return.
  DeviceBuffer(size_t bytes, const std::string& name);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  char* get() const { return base_ ? base_ + kGuard : nullptr; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  // The two guard bands (kGuard bytes each; null when nothing is allocated). Engine::check_guards
  // gathers every buffer's bands in one copy and judges them with guard_damage.
  const char* guard_before() const { return base_; }
  const char* guard_after() const { return base_ ? base_ + kGuard + bytes_ : nullptr; }
  // "" when `before` and `after` (host copies of the two bands) hold the pattern, else which
  // bytes changed.
  std::string guard_damage(const uint8_t* before, const uint8_t* after) const;
  static uint8_t pattern(size_t i) { return uint8_t(0xA5u ^ (i * 29u)); }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;  // made and freed in its order
};

struct LayerPool {
  size_t h_pitch = 0;     // bytes per slot: the STORED width (FP16 size in f16-pool mode)
  size_t conv_pitch = 0;  // bytes per slot: conv_dim * d_conv * 4
  DeviceBuffer h, conv, h_checkpoint, conv_checkpoint;  // [max_slots + 1] slots
  DeviceBuffer h_intermediates;     // sum of capacity(s) entries, slot s starts at inter_first[s]
  DeviceBuffer conv_intermediates;  // [max_slots + 1][conv_capacity]
  DeviceBuffer snapshot_h, snapshot_conv;  // [snapshot_slots]
  DeviceBuffer norm_w, conv_w, conv_bias, A_log, dt_bias, D;  // weights (not state; D: Mamba-2)
  // The PLE carry of a layer hosting one (empty buffers otherwise; docs/cuda.md "PLE carry").
  size_t ple_history_pitch = 0;  // bytes per slot: H token ids (FP32)
  size_t ple_conv_pitch = 0;     // bytes per slot: conv_rows * C * 4
  size_t ple_ids_pitch = 0;      // bytes per slot: (H + ple_snaps) * 4
  int ple_snaps = 0;             // verify snapshots per slot: the largest K a slot takes (max capacity + 1)
  DeviceBuffer ple_history, ple_conv, ple_history_checkpoint, ple_conv_checkpoint;  // [max_slots + 1]
  DeviceBuffer ple_snapshot_conv;  // [max_slots + 1][ple_snaps]: the conv state after t rows of the last verify
  // [max_slots + 1][H + ple_snaps]: the history before the last verify, then its tokens, so the
  // history after t kept rows is the H ids from position t (a partial accept rebuilds it from there)
  DeviceBuffer ple_ids;
  DeviceBuffer snapshot_ple_history, snapshot_ple_conv;  // [snapshot_slots] (prefix cache)
  DeviceBuffer ple_w;                // [C][k_size] weights
  DeviceBuffer ple_fresh_history;    // [H] the EOS id: a fresh carry's history
};

class DevicePool {
 public:
  DevicePool() = default;
  // Allocates and initialises every buffer on `stream` and waits for it once at the end.
  DevicePool(const Model& model, const PoolConfig& cfg, cudaStream_t stream);

  const PoolConfig& config() const { return cfg_; }
  int slots() const { return cfg_.max_slots + 1; }  // with the dummy
  LayerPool& layer(int l) { return layers_[size_t(l)]; }
  const LayerPool& layer(int l) const { return layers_[size_t(l)]; }
  int layers() const { return int(layers_.size()); }

  // Slot addresses (slot may be the dummy).
  char* h(int l, int s) const { return layers_[size_t(l)].h.get() + size_t(s) * layers_[size_t(l)].h_pitch; }
  char* conv(int l, int s) const { return layers_[size_t(l)].conv.get() + size_t(s) * layers_[size_t(l)].conv_pitch; }
  char* h_checkpoint(int l, int s) const;
  char* conv_checkpoint(int l, int s) const;
  char* h_intermediate(int l, int s, int t) const;
  char* conv_intermediate(int l, int s, int t) const;
  char* snapshot_h(int l, int i) const;
  char* snapshot_conv(int l, int i) const;
  char* stage(int s) const { return stage_.get() + size_t(s) * stage_pitch_; }
  // PLE carry addresses (a layer hosting one). ple_snapshot_conv checks t against ple_snaps;
  // ple_ids_at(l, s, t): the history after t kept rows of the slot's last verify.
  char* ple_history(int l, int s) const;
  char* ple_conv(int l, int s) const;
  char* ple_history_checkpoint(int l, int s) const;
  char* ple_conv_checkpoint(int l, int s) const;
  char* ple_snapshot_conv(int l, int s, int t) const;
  char* ple_ids_at(int l, int s, int t) const;
  char* snapshot_ple_history(int l, int i) const;
  char* snapshot_ple_conv(int l, int i) const;
  size_t stage_pitch() const { return stage_pitch_; }
  const DeviceBuffer& stage_buffer() const { return stage_; }
  int inter_first(int s) const { return inter_first_[size_t(s)]; }
  const int* inter_first_device() const { return reinterpret_cast<const int*>(inter_first_dev_.get()); }

  const DeviceBuffer& family(int l, PoolFamily f) const;
  size_t pitch(int l, PoolFamily f) const;
  size_t offset(int l, PoolFamily f, int slot, int t) const;  // bytes from the family's start

  // Every allocation of the pool, for guard checks.
  std::vector<const DeviceBuffer*> buffers() const;

 private:
  PoolConfig cfg_;
  std::vector<LayerPool> layers_;
  DeviceBuffer stage_;  // f16-pool: [max_slots + 1] FP32 stages shared by the slot's layers
  size_t stage_pitch_ = 0;
  std::vector<int> inter_first_;
  DeviceBuffer inter_first_dev_;
};

}  // namespace ssm::cuda
