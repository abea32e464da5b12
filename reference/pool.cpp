// Reference pool: slots, the dummy slot, tiered h intermediate capacities, exhaustion, export.
// Counterpart: cuda/pool.cpp.
#include "reference/reference_backend.h"

#include "reference/layer_step.h"
#include "core/host_copies.h"
#include "core/state_digest.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ssm::ref {

void ReferenceBackend::create_pool(const Model& model, const PoolConfig& pool) {
  model.validate();
  pool.validate();
  model_ = model;
  contract_ = Contract(model.spec, pool);
  // Slot storage is created when a slot is claimed (the dummy on its first padding row), so a
  // large pool of a big preset costs host memory only for the sequences in use.
  slots_.assign(size_t(pool.max_slots) + 1, Slot{});
  snapshots_.assign(size_t(pool.snapshot_slots), Snapshot{});
}

ReferenceBackend::Slot ReferenceBackend::fresh_slot(int slot) const {
  const PoolConfig& pool = contract_.pool();
  const DType hd = pool.h_mode == HMode::f16_pool || (slot == pool.max_slots && pool.h_mode == HMode::f16)
                       ? DType::f16 : DType::f32;
  Slot s;
  for (const LayerSpec& ls : model_.spec.layers) {
    LayerSlot l;
    l.h = HField{Tensor::zeros(hd, h_shape(ls)), fresh_state_condition(ls)};
    l.conv = Tensor::zeros(DType::f32, conv_shape(ls));
    // checkpoints and intermediates are written whole before they are ever read
    l.h_intermediates.resize(size_t(pool.capacity(slot)));
    l.conv_intermediates.resize(size_t(pool.conv_capacity));
    s.layers.push_back(std::move(l));
  }
  if (pool.h_mode == HMode::f16_pool) {
    s.stage = Tensor::zeros(DType::f32, {stage_elems(model_.spec)});
    s.stage_cond = s.stage;
  }
  return s;
}

int ReferenceBackend::slot_index(int slot) {
  if (slot != kPadRow) return slot;
  const int dummy = contract_.dummy_slot();
  if (slots_[size_t(dummy)].layers.empty()) slots_[size_t(dummy)] = fresh_slot(dummy);
  return dummy;
}

int ReferenceBackend::alloc(int min_capacity) {
  const int slot = contract_.check_alloc(min_capacity);
  slots_[size_t(slot)] = fresh_slot(slot);  // a claimed slot is zeroed before first use
  contract_.on_alloc(slot);
  return slot;
}

void ReferenceBackend::release(int slot) {
  contract_.check_claimed("release", slot);
  contract_.on_release(slot);
  slots_[size_t(slot)] = Slot{};  // the next alloc zeroes it anyway
}

StepOutputs ReferenceBackend::empty_outputs(const ModelSpec& spec, int rows) {
  StepOutputs o;
  o.rows = rows;
  for (const LayerSpec& s : spec.layers) {
    o.layers.emplace_back(size_t(rows) * size_t(s.out_dim()), 0.0f);
    o.ple.emplace_back(size_t(rows) * size_t(s.ple.channels), 0.0f);
  }
  o.condition = o.layers;
  o.ple_condition = o.ple;
  return o;
}

void ReferenceBackend::throw_beyond_capacity(const char* family, int t, int slot, size_t capacity) {
  throw std::out_of_range("reference: " + std::string(family) + " intermediate " + std::to_string(t) + " of slot " +
                          std::to_string(slot) + " is beyond its capacity " + std::to_string(capacity) +
                          " (an op the contract should have refused)");
}

SequenceState ReferenceBackend::export_state(int slot) {
  contract_.check_claimed("export", slot);
  const SlotMeta& m = contract_.slot(slot);
  const Slot& s = slots_[size_t(slot)];
  SequenceState out;
  out.slot = slot;
  out.last_verify_k = m.last_verify_k;
  // The state's tensors are copied last, all at once: on several threads when the state is large
  // (a real shape's tens of megabytes), where one thread's copies were most of an export.
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  size_t bytes = 0;
  auto copy = [&](Tensor& to, const Tensor& from) {
    copies.emplace_back(&to, &from);
    bytes += from.bytes();
  };
  out.layers.resize(s.layers.size());  // sized first: the copies point into it
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const LayerSlot& l = s.layers[li];
    LayerState& ls = out.layers[li];
    copy(ls.h, l.h.value);
    ls.condition.h = l.h.cond.rho;
    copy(ls.conv, l.conv);
    ls.h_is_f16 = m.h_is_f16;
    if (m.has_h_checkpoint) {
      copy(ls.h_checkpoint.emplace(), l.h_checkpoint.value);
      ls.condition.h_checkpoint = l.h_checkpoint.cond.rho;
    }
    if (m.has_conv_checkpoint) copy(ls.conv_checkpoint.emplace(), l.conv_checkpoint);
    const int inter = std::max(m.last_verify_k - 1, 0);
    ls.h_intermediates.resize(size_t(inter));
    ls.conv_intermediates.resize(size_t(inter));
    for (int t = 0; t < inter; ++t) {
      const HField& hi = intermediate(l.h_intermediates, t, "h", slot);
      copy(ls.h_intermediates[size_t(t)], hi.value);
      ls.condition.h_intermediates.push_back(hi.cond.rho);
      copy(ls.conv_intermediates[size_t(t)], intermediate(l.conv_intermediates, t, "conv", slot));
    }
    ls.ple = l.ple;
    if (m.has_conv_checkpoint) ls.ple_checkpoint = l.ple_checkpoint;
    if (m.last_verify_k > 0) ls.ple_snapshots = l.ple_snapshots;
  }
  if (contract_.pool().h_mode == HMode::f16_pool) {
    copy(out.h_prefill_stage.emplace(), s.stage);
    out.h_prefill_stage_condition = s.stage_cond;
  }
  run_host_copies(int(copies.size()), bytes, [&](int i) { *copies[size_t(i)].first = *copies[size_t(i)].second; });
  return out;
}

// Hashes what export_state copies, in the order state_digest(SequenceState) adds it (the
// property test in tests/state_digest_test.cpp checks that the two agree op by op).
std::optional<uint64_t> ReferenceBackend::state_digest(int slot) {
  contract_.check_claimed("export", slot);
  const SlotMeta& m = contract_.slot(slot);
  const Slot& s = slots_[size_t(slot)];
  StateHasher h;
  h.add(int64_t(m.last_verify_k));
  h.add(int64_t(s.layers.size()));
  for (const LayerSlot& l : s.layers) {
    const int inter = std::max(m.last_verify_k - 1, 0);
    h.add(l.h.value);
    h.add(l.conv);
    h.add_optional(m.has_h_checkpoint ? &l.h_checkpoint.value : nullptr);
    h.add_optional(m.has_conv_checkpoint ? &l.conv_checkpoint : nullptr);
    h.add(int64_t(inter));
    for (int t = 0; t < inter; ++t) h.add(intermediate(l.h_intermediates, t, "h", slot).value);
    h.add(int64_t(inter));
    for (int t = 0; t < inter; ++t) h.add(intermediate(l.conv_intermediates, t, "conv", slot));
    h.add(int64_t(m.h_is_f16));
    h.add_optional(&l.h.cond.rho);
    h.add_optional(m.has_h_checkpoint ? &l.h_checkpoint.cond.rho : nullptr);
    h.add(int64_t(inter));
    for (int t = 0; t < inter; ++t) h.add(intermediate(l.h_intermediates, t, "h", slot).cond.rho);
    h.add(int64_t(false));  // conv_oldest_column_absent
    h.add(l.ple);
    h.add_optional(m.has_conv_checkpoint && l.ple_checkpoint ? &*l.ple_checkpoint : nullptr);
    const size_t snaps = m.last_verify_k > 0 ? l.ple_snapshots.size() : 0;
    h.add(int64_t(snaps));
    for (size_t t = 0; t < snaps; ++t) h.add(l.ple_snapshots[t]);
  }
  const bool stage = contract_.pool().h_mode == HMode::f16_pool;
  h.add_optional(stage ? &s.stage : nullptr);
  h.add_optional(stage ? &s.stage_cond : nullptr);
  h.add(int64_t(false));  // prefill_stage_absent
  return h.digest();
}

}  // namespace ssm::ref
