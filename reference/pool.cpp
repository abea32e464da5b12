// Reference pool: slots, the dummy slot, tiered h intermediate capacities, exhaustion, export.
// Counterpart: cuda/pool.cpp.
#include "reference/reference_backend.h"

#include "reference/layer_step.h"
#include "core/host_copies.h"
#include "core/state_digest.h"
#include "core/state_fields.h"

#include <algorithm>
#include <map>
#include <set>
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
  s.layers.resize(model_.spec.layers.size());
  TensorCopies zeros;  // a real shape's fields are megabytes: zeroed together
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerSpec& ls = model_.spec.layers[i];
    LayerSlot& l = s.layers[i];
    const size_t h_bytes = size_t(ls.h_elems()) * (hd == DType::f16 ? 2 : 4);
    zeros.add_task(h_bytes, [&l, &ls, hd] { l.h.value = Tensor::zeros(hd, h_shape(ls)); });
    zeros.add_task(h_bytes, [&l, &ls] { l.h.cond = fresh_state_condition(ls); });
    zeros.add_task(0, [&l, &ls] { l.conv = Tensor::zeros(DType::f32, conv_shape(ls)); });
    // checkpoints and intermediates are written whole before they are ever read
    l.h_intermediates.resize(size_t(pool.capacity(slot)));
    l.conv_intermediates.resize(size_t(pool.conv_capacity));
  }
  zeros.run();
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

std::vector<std::pair<FieldKey, const Tensor*>> ReferenceBackend::export_fields(int slot) const {
  const SlotMeta& m = contract_.slot(slot);
  const Slot& s = slots_[size_t(slot)];
  std::vector<std::pair<FieldKey, const Tensor*>> v;
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const LayerSlot& l = s.layers[li];
    const int L = int(li);
    v.push_back({{FieldKind::h, L, 0}, &l.h.value});
    v.push_back({{FieldKind::conv, L, 0}, &l.conv});
    if (m.has_h_checkpoint) v.push_back({{FieldKind::h_checkpoint, L, 0}, &l.h_checkpoint.value});
    if (m.has_conv_checkpoint) v.push_back({{FieldKind::conv_checkpoint, L, 0}, &l.conv_checkpoint});
    for (int t = 0; t < std::max(m.last_verify_k - 1, 0); ++t) {
      v.push_back({{FieldKind::h_intermediate, L, t}, &intermediate(l.h_intermediates, t, "h", slot).value});
      v.push_back({{FieldKind::conv_intermediate, L, t}, &intermediate(l.conv_intermediates, t, "conv", slot)});
    }
    auto carry = [&](FieldKind history, const PleCarry& c, int t) {
      v.push_back({{history, L, t}, &c.history});
      v.push_back({{FieldKind(int(history) + 1), L, t}, &c.conv});
    };
    if (l.ple) carry(FieldKind::ple_history, *l.ple, 0);
    if (m.has_conv_checkpoint && l.ple_checkpoint) carry(FieldKind::ple_checkpoint_history, *l.ple_checkpoint, 0);
    if (m.last_verify_k > 0)
      for (size_t t = 0; t < l.ple_snapshots.size(); ++t) carry(FieldKind::ple_snapshot_history, l.ple_snapshots[t], int(t));
  }
  if (contract_.pool().h_mode == HMode::f16_pool) {
    v.push_back({{FieldKind::stage, -1, 0}, &s.stage});
    v.push_back({{FieldKind::stage_condition, -1, 0}, &s.stage_cond});
  }
  return v;
}

SequenceState ReferenceBackend::export_rest(int slot) const {
  const SlotMeta& m = contract_.slot(slot);
  const Slot& s = slots_[size_t(slot)];
  SequenceState out;
  out.slot = slot;
  out.last_verify_k = m.last_verify_k;
  out.layers.resize(s.layers.size());
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const LayerSlot& l = s.layers[li];
    LayerState& ls = out.layers[li];
    ls.h_is_f16 = m.h_is_f16;
    ls.condition.h = l.h.cond.rho;
    if (m.has_h_checkpoint) ls.condition.h_checkpoint = l.h_checkpoint.cond.rho;
    for (int t = 0; t < std::max(m.last_verify_k - 1, 0); ++t)
      ls.condition.h_intermediates.push_back(intermediate(l.h_intermediates, t, "h", slot).cond.rho);
  }
  return out;
}

SequenceState ReferenceBackend::export_state(int slot) {
  contract_.check_claimed("export", slot);
  SequenceState none;
  return export_from(slot, none, {}, {});
}

void ReferenceBackend::export_update(int slot, const FieldDigests& before, const FieldDigests& now,
                                     SequenceState& state) {
  contract_.check_claimed("export", slot);
  state = export_from(slot, state, before, now);
}

SequenceState ReferenceBackend::export_from(int slot, SequenceState& previous, const FieldDigests& before,
                                            const FieldDigests& now) const {
  SequenceState out = export_rest(slot);
  const std::set<FieldKey> carried = carry_unchanged_fields(previous, before, now, out);
  std::map<FieldKey, Tensor> spare = take_fields(previous);  // the changed fields' storage
  // The fields not carried over are copied last, all at once: on several threads when the state is
  // large (a real shape's tens of megabytes), where one thread's copies were most of an export.
  // Every field is placed first (lists grown), so the pointers into `out` stay put.
  const std::vector<std::pair<FieldKey, const Tensor*>> fields = export_fields(slot);
  for (const auto& f : fields) field_tensor(out, f.first);
  TensorCopies copies;
  for (const auto& [key, from] : fields) {
    Tensor& to = field_tensor(out, key);
    if (carried_as_is(carried, key, to, from->dtype(), from->shape())) continue;
    const auto old = spare.find(key);
    if (old != spare.end()) to = std::move(old->second);  // a copy into it keeps its storage when it is large enough
    copies.add(to, *from);
  }
  copies.run();
  return out;
}

// Hashes each field of what export_state copies as field_digests(SequenceState) does (the
// property test in tests/state_digest_test.cpp checks that the two agree op by op).
std::optional<FieldDigests> ReferenceBackend::field_digests(int slot) {
  contract_.check_claimed("export", slot);
  const std::vector<std::pair<FieldKey, const Tensor*>> fields = export_fields(slot);
  FieldDigests d(fields.size());
  size_t bytes = 0;
  for (const auto& f : fields) bytes += f.second->bytes();
  // the fields of a large state on several threads, as its copies (each digest is the field's own)
  run_host_copies(int(fields.size()), bytes, [&](int i) {
    const auto& [key, t] = fields[size_t(i)];
    d[size_t(i)] = FieldDigest{key, tensor_digest(*t)};
  });
  d.push_back({FieldKey{FieldKind::rest, -1, 0}, rest_digest(export_rest(slot))});
  return d;
}

}  // namespace ssm::ref
