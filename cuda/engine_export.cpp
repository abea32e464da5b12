// Reading a slot's state back (see engine.h): the fields an export reads (export_fields), the
// export itself and its update from digests (export_state, export_update), the per-field device
// digests (field_digests), the one batched gather reads go through (read_back), and the test
// hooks that read device memory: check_guards (its bands through read_back) and read_family.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "core/host_copies.h"
#include "core/state_digest.h"
#include "cuda/check.h"
#include "cuda/engine.h"
#include "cuda/region_digest.h"

namespace ssm::cuda {

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
    if (m.has_h_checkpoint)
      add(FieldKind::h_checkpoint, l, 0, m.h_checkpoint_dtype, h_shape(s), pool_.h_checkpoint(l, slot));
    if (m.has_conv_checkpoint)
      add(FieldKind::conv_checkpoint, l, 0, DType::f32, conv_shape(s), pool_.conv_checkpoint(l, slot));
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
      if (ple_live_[size_t(slot)])
        carry(FieldKind::ple_history, 0, pool_.ple_history(l, slot), pool_.ple_conv(l, slot));
      if (m.has_conv_checkpoint && ple_checkpoint_[size_t(slot)])
        carry(FieldKind::ple_checkpoint_history, 0, pool_.ple_history_checkpoint(l, slot),
              pool_.ple_conv_checkpoint(l, slot));
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
    else tensors[size_t(i)] = Tensor::zeros(f.dtype, f.shape);
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
  for (const ExportField& f : fields)
    regions.push_back(DigestRegion{f.src, shape_elems(f.shape) * dtype_size(f.dtype)});
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
