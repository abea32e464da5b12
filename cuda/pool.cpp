// Device pool allocation and addressing (see pool.h).
#include "cuda/pool.h"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "core/state.h"
#include "cuda/check.h"
#include "cuda/device_memory.h"

namespace ssm::cuda {

namespace {
// The guard pattern of both bands, in host memory that lives as long as the process (an
// asynchronous copy from pageable memory returns once the driver has staged it).
const uint8_t* guard_image() {
  static const std::vector<uint8_t> g = [] {
    std::vector<uint8_t> v(DeviceBuffer::kGuard);
    for (size_t i = 0; i < v.size(); ++i) v[i] = DeviceBuffer::pattern(i);
    return v;
  }();
  return g.data();
}
}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& name, cudaStream_t stream)
    : bytes_(bytes), name_(name), stream_(stream) {
  base_ = static_cast<char*>(device_alloc(bytes + 2 * kGuard, stream));
  try {
    SSM_CUDA(cudaMemcpyAsync(base_, guard_image(), kGuard, cudaMemcpyHostToDevice, stream));
    SSM_CUDA(cudaMemcpyAsync(base_ + kGuard + bytes, guard_image(), kGuard, cudaMemcpyHostToDevice, stream));
    if (bytes) SSM_CUDA(cudaMemsetAsync(base_ + kGuard, 0, bytes, stream));
  } catch (...) {
    device_free(base_, stream);  // no destructor runs for an unfinished constructor
    throw;
  }
}

// The engine's streams are non-blocking, so nothing orders work on the legacy stream before
// theirs: without this wait, a GPU shared by other processes ran the zeroing after the first
// upload of inputs and zeroed them (an H200 campaign of 14 processes side by side; docs/cuda.md
// "Streams").
DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& name) : DeviceBuffer(bytes, name, cudaStreamLegacy) {
  SSM_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
}

DeviceBuffer::~DeviceBuffer() { device_free(base_, stream_); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    device_free(base_, stream_);
    base_ = o.base_;
    bytes_ = o.bytes_;
    name_ = std::move(o.name_);
    stream_ = o.stream_;
    o.base_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

std::string DeviceBuffer::guard_damage(const uint8_t* before, const uint8_t* after) const {
  std::string out;
  for (size_t i = 0; i < kGuard; ++i) {
    if (before[i] != pattern(i)) {
      out += name_ + ": guard before byte " + std::to_string(kGuard - i) + " changed; ";
      break;
    }
  }
  for (size_t i = 0; i < kGuard; ++i) {
    if (after[i] != pattern(i)) {
      out += name_ + ": guard after byte " + std::to_string(i) + " changed; ";
      break;
    }
  }
  return out;
}

namespace {
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The copy is queued on `stream` after the buffer's zeroing; the pool waits for it before `v` can go.
DeviceBuffer upload(const std::vector<float>& v, const std::string& name, cudaStream_t stream) {
  DeviceBuffer b(v.size() * 4, name, stream);
  if (!v.empty()) SSM_CUDA(cudaMemcpyAsync(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice, stream));
  return b;
}
}  // namespace

DevicePool::DevicePool(const Model& model, const PoolConfig& cfg, cudaStream_t stream) : cfg_(cfg) {
  const int S = cfg.max_slots + 1;
  inter_first_.resize(size_t(S) + 1);
  inter_first_[0] = 0;
  for (int s = 0; s < S; ++s) inter_first_[size_t(s) + 1] = inter_first_[size_t(s)] + cfg.capacity(s);
  const int total_inter = inter_first_[size_t(S)];
  for (size_t l = 0; l < model.spec.layers.size(); ++l) {
    const LayerSpec& ls = model.spec.layers[l];
    const LayerWeights& w = model.weights[l];
    const std::string at = "layer " + std::to_string(l) + " ";
    LayerPool p;
    p.h_pitch = size_t(ls.h_elems()) * (cfg.h_mode == HMode::f16_pool ? 2 : 4);
    p.conv_pitch = size_t(ls.conv_elems()) * 4;
    p.h = DeviceBuffer(p.h_pitch * size_t(S), at + "h", stream);
    p.conv = DeviceBuffer(p.conv_pitch * size_t(S), at + "conv", stream);
    p.h_checkpoint = DeviceBuffer(p.h_pitch * size_t(S), at + "h_checkpoint", stream);
    p.conv_checkpoint = DeviceBuffer(p.conv_pitch * size_t(S), at + "conv_checkpoint", stream);
    p.h_intermediates = DeviceBuffer(p.h_pitch * size_t(total_inter), at + "h_intermediates", stream);
    p.conv_intermediates = DeviceBuffer(p.conv_pitch * size_t(S) * size_t(cfg.conv_capacity), at + "conv_intermediates", stream);
    p.snapshot_h = DeviceBuffer(p.h_pitch * size_t(cfg.snapshot_slots), at + "snapshot_h", stream);
    p.snapshot_conv = DeviceBuffer(p.conv_pitch * size_t(cfg.snapshot_slots), at + "snapshot_conv", stream);
    p.conv_w = upload(w.conv_w, at + "conv_w", stream);
    p.conv_bias = upload(w.conv_bias, at + "conv_bias", stream);
    p.A_log = upload(w.A_log, at + "A_log", stream);
    p.dt_bias = upload(w.dt_bias, at + "dt_bias", stream);
    p.norm_w = upload(w.norm_w, at + "norm_w", stream);
    p.D = upload(w.D, at + "D", stream);
    if (ls.ple.hosted()) {
      const PleSpec& e = ls.ple;
      p.ple_snaps = cfg.max_capacity() + 1;
      p.ple_history_pitch = size_t(e.history_len()) * 4;
      p.ple_conv_pitch = size_t(e.conv_rows()) * size_t(e.channels) * 4;
      p.ple_ids_pitch = size_t(e.history_len() + p.ple_snaps) * 4;
      p.ple_history = DeviceBuffer(p.ple_history_pitch * size_t(S), at + "ple_history", stream);
      p.ple_conv = DeviceBuffer(p.ple_conv_pitch * size_t(S), at + "ple_conv", stream);
      p.ple_history_checkpoint = DeviceBuffer(p.ple_history_pitch * size_t(S), at + "ple_history_checkpoint", stream);
      p.ple_conv_checkpoint = DeviceBuffer(p.ple_conv_pitch * size_t(S), at + "ple_conv_checkpoint", stream);
      p.ple_snapshot_conv = DeviceBuffer(p.ple_conv_pitch * size_t(S) * size_t(p.ple_snaps), at + "ple_snapshot_conv", stream);
      p.ple_ids = DeviceBuffer(p.ple_ids_pitch * size_t(S), at + "ple_ids", stream);
      p.snapshot_ple_history = DeviceBuffer(p.ple_history_pitch * size_t(cfg.snapshot_slots), at + "snapshot_ple_history", stream);
      p.snapshot_ple_conv = DeviceBuffer(p.ple_conv_pitch * size_t(cfg.snapshot_slots), at + "snapshot_ple_conv", stream);
      p.ple_w = upload(w.ple_w, at + "ple_w", stream);
      p.ple_fresh_history = upload(std::vector<float>(size_t(e.history_len()), float(e.eos_id)), at + "ple_fresh_history", stream);
    }
    layers_.push_back(std::move(p));
  }
  if (cfg.h_mode == HMode::f16_pool) {
    stage_pitch_ = round_up(size_t(stage_elems(model.spec)) * 4, 16);  // 16 B: vector access
    stage_ = DeviceBuffer(stage_pitch_ * size_t(S), "h_prefill_stage", stream);
  }
  inter_first_dev_ = DeviceBuffer(inter_first_.size() * sizeof(int), "inter_first", stream);
  SSM_CUDA(cudaMemcpyAsync(inter_first_dev_.get(), inter_first_.data(), inter_first_.size() * sizeof(int),
                           cudaMemcpyHostToDevice, stream));
  // One wait per pool, not per buffer: other streams (the engine's copy stream) use it next.
  SSM_CUDA(cudaStreamSynchronize(stream));
}

char* DevicePool::h_checkpoint(int l, int s) const {
  return layers_[size_t(l)].h_checkpoint.get() + size_t(s) * layers_[size_t(l)].h_pitch;
}
char* DevicePool::conv_checkpoint(int l, int s) const {
  return layers_[size_t(l)].conv_checkpoint.get() + size_t(s) * layers_[size_t(l)].conv_pitch;
}
namespace {
// An index the contract should have refused is reported, never turned into a neighbour's address.
void check_intermediate(const char* family, int s, int t, int capacity) {
  if (t < 0 || t >= capacity)
    throw std::out_of_range(std::string("cuda pool: ") + family + " intermediate " + std::to_string(t) + " of slot " +
                            std::to_string(s) + " is beyond its capacity " + std::to_string(capacity) +
                            " (an op the contract should have refused)");
}
}  // namespace

char* DevicePool::h_intermediate(int l, int s, int t) const {
  check_intermediate("h", s, t, cfg_.capacity(s));
  return layers_[size_t(l)].h_intermediates.get() + size_t(inter_first_[size_t(s)] + t) * layers_[size_t(l)].h_pitch;
}
char* DevicePool::conv_intermediate(int l, int s, int t) const {
  check_intermediate("conv", s, t, cfg_.conv_capacity);
  return layers_[size_t(l)].conv_intermediates.get() +
         (size_t(s) * size_t(cfg_.conv_capacity) + size_t(t)) * layers_[size_t(l)].conv_pitch;
}
char* DevicePool::snapshot_h(int l, int i) const {
  return layers_[size_t(l)].snapshot_h.get() + size_t(i) * layers_[size_t(l)].h_pitch;
}
char* DevicePool::snapshot_conv(int l, int i) const {
  return layers_[size_t(l)].snapshot_conv.get() + size_t(i) * layers_[size_t(l)].conv_pitch;
}

char* DevicePool::ple_history(int l, int s) const {
  return layers_[size_t(l)].ple_history.get() + size_t(s) * layers_[size_t(l)].ple_history_pitch;
}
char* DevicePool::ple_conv(int l, int s) const {
  return layers_[size_t(l)].ple_conv.get() + size_t(s) * layers_[size_t(l)].ple_conv_pitch;
}
char* DevicePool::ple_history_checkpoint(int l, int s) const {
  return layers_[size_t(l)].ple_history_checkpoint.get() + size_t(s) * layers_[size_t(l)].ple_history_pitch;
}
char* DevicePool::ple_conv_checkpoint(int l, int s) const {
  return layers_[size_t(l)].ple_conv_checkpoint.get() + size_t(s) * layers_[size_t(l)].ple_conv_pitch;
}
char* DevicePool::ple_snapshot_conv(int l, int s, int t) const {
  const LayerPool& p = layers_[size_t(l)];
  check_intermediate("ple snapshot", s, t, p.ple_snaps);
  return p.ple_snapshot_conv.get() + (size_t(s) * size_t(p.ple_snaps) + size_t(t)) * p.ple_conv_pitch;
}
char* DevicePool::ple_ids_at(int l, int s, int t) const {
  const LayerPool& p = layers_[size_t(l)];
  check_intermediate("ple history ids", s, t, p.ple_snaps + 1);  // t = K: the history after the whole verify
  return p.ple_ids.get() + size_t(s) * p.ple_ids_pitch + size_t(t) * 4;
}
char* DevicePool::snapshot_ple_history(int l, int i) const {
  return layers_[size_t(l)].snapshot_ple_history.get() + size_t(i) * layers_[size_t(l)].ple_history_pitch;
}
char* DevicePool::snapshot_ple_conv(int l, int i) const {
  return layers_[size_t(l)].snapshot_ple_conv.get() + size_t(i) * layers_[size_t(l)].ple_conv_pitch;
}

const DeviceBuffer& DevicePool::family(int l, PoolFamily f) const {
  const LayerPool& p = layers_.at(size_t(l));
  switch (f) {
    case PoolFamily::h: return p.h;
    case PoolFamily::conv: return p.conv;
    case PoolFamily::h_checkpoint: return p.h_checkpoint;
    case PoolFamily::conv_checkpoint: return p.conv_checkpoint;
    case PoolFamily::h_intermediates: return p.h_intermediates;
    case PoolFamily::conv_intermediates: return p.conv_intermediates;
    case PoolFamily::snapshot_h: return p.snapshot_h;
    case PoolFamily::snapshot_conv: return p.snapshot_conv;
    case PoolFamily::stage: return stage_;
  }
  throw std::invalid_argument("unknown pool family");
}

size_t DevicePool::pitch(int l, PoolFamily f) const {
  const LayerPool& p = layers_.at(size_t(l));
  switch (f) {
    case PoolFamily::h: case PoolFamily::h_checkpoint: case PoolFamily::h_intermediates:
    case PoolFamily::snapshot_h: return p.h_pitch;
    case PoolFamily::conv: case PoolFamily::conv_checkpoint: case PoolFamily::conv_intermediates:
    case PoolFamily::snapshot_conv: return p.conv_pitch;
    case PoolFamily::stage: return stage_pitch_;
  }
  throw std::invalid_argument("unknown pool family");
}

size_t DevicePool::offset(int l, PoolFamily f, int slot, int t) const {
  const size_t p = pitch(l, f);
  switch (f) {
    case PoolFamily::h_intermediates: return size_t(inter_first_.at(size_t(slot)) + t) * p;
    case PoolFamily::conv_intermediates: return (size_t(slot) * size_t(cfg_.conv_capacity) + size_t(t)) * p;
    default: return size_t(slot) * p;
  }
}

std::vector<const DeviceBuffer*> DevicePool::buffers() const {
  std::vector<const DeviceBuffer*> v;
  for (const LayerPool& p : layers_)
    for (const DeviceBuffer* b : {&p.h, &p.conv, &p.h_checkpoint, &p.conv_checkpoint, &p.h_intermediates,
                                  &p.conv_intermediates, &p.snapshot_h, &p.snapshot_conv, &p.norm_w, &p.conv_w,
                                  &p.conv_bias, &p.A_log, &p.dt_bias, &p.D, &p.ple_history, &p.ple_conv,
                                  &p.ple_history_checkpoint, &p.ple_conv_checkpoint, &p.ple_snapshot_conv, &p.ple_ids,
                                  &p.snapshot_ple_history, &p.snapshot_ple_conv, &p.ple_w, &p.ple_fresh_history})
      v.push_back(b);
  if (stage_.get()) v.push_back(&stage_);
  v.push_back(&inter_first_dev_);
  return v;
}

}  // namespace ssm::cuda
