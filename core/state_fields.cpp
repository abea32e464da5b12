// The fields of an exported state (see state_fields.h).
#include "core/state_fields.h"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/state_digest.h"

namespace ssm {

bool FieldKey::operator<(const FieldKey& o) const {
  return std::make_tuple(int(kind), layer, index) < std::make_tuple(int(o.kind), o.layer, o.index);
}

void for_each_field(const SequenceState& s, const std::function<void(const FieldKey&, const Tensor&)>& f) {
  for (size_t li = 0; li < s.layers.size(); ++li) {
    const LayerState& l = s.layers[li];
    const int L = int(li);
    f({FieldKind::h, L, 0}, l.h);
    f({FieldKind::conv, L, 0}, l.conv);
    if (l.h_checkpoint) f({FieldKind::h_checkpoint, L, 0}, *l.h_checkpoint);
    if (l.conv_checkpoint) f({FieldKind::conv_checkpoint, L, 0}, *l.conv_checkpoint);
    const size_t inter = std::max(l.h_intermediates.size(), l.conv_intermediates.size());
    for (size_t t = 0; t < inter; ++t) {
      if (t < l.h_intermediates.size()) f({FieldKind::h_intermediate, L, int(t)}, l.h_intermediates[t]);
      if (t < l.conv_intermediates.size()) f({FieldKind::conv_intermediate, L, int(t)}, l.conv_intermediates[t]);
    }
    if (l.ple) {
      f({FieldKind::ple_history, L, 0}, l.ple->history);
      f({FieldKind::ple_conv, L, 0}, l.ple->conv);
    }
    if (l.ple_checkpoint) {
      f({FieldKind::ple_checkpoint_history, L, 0}, l.ple_checkpoint->history);
      f({FieldKind::ple_checkpoint_conv, L, 0}, l.ple_checkpoint->conv);
    }
    for (size_t t = 0; t < l.ple_snapshots.size(); ++t) {
      f({FieldKind::ple_snapshot_history, L, int(t)}, l.ple_snapshots[t].history);
      f({FieldKind::ple_snapshot_conv, L, int(t)}, l.ple_snapshots[t].conv);
    }
  }
  if (s.h_prefill_stage) f({FieldKind::stage, -1, 0}, *s.h_prefill_stage);
  if (s.h_prefill_stage_condition) f({FieldKind::stage_condition, -1, 0}, *s.h_prefill_stage_condition);
}

namespace {
// The tensor a key names in `s`; when absent, created (create: an optional emplaced, a list grown)
// or null. One switch for field_tensor and find_field.
Tensor* locate(SequenceState& s, const FieldKey& k, bool create) {
  auto opt = [create](std::optional<Tensor>& t) -> Tensor* {
    if (!t && create) t.emplace();
    return t ? &*t : nullptr;
  };
  auto carry = [create](std::optional<PleCarry>& c) -> PleCarry* {
    if (!c && create) c.emplace();
    return c ? &*c : nullptr;
  };
  auto at = [create](auto& v, int index) -> decltype(&v[0]) {
    if (index < 0) {
      if (!create) return nullptr;
      throw std::logic_error("field index " + std::to_string(index));
    }
    if (v.size() <= size_t(index)) {
      if (!create) return nullptr;
      v.resize(size_t(index) + 1);
    }
    return &v[size_t(index)];
  };
  switch (k.kind) {
    case FieldKind::stage: return opt(s.h_prefill_stage);
    case FieldKind::stage_condition: return opt(s.h_prefill_stage_condition);
    case FieldKind::rest: {
      if (create) throw std::logic_error("the rest of a state is no tensor field");
      return nullptr;
    }
    default: break;
  }
  if (k.layer < 0 || size_t(k.layer) >= s.layers.size()) {
    if (!create) return nullptr;
    throw std::logic_error("field of layer " + std::to_string(k.layer) + " in a state of " +
                           std::to_string(s.layers.size()) + " layers");
  }
  LayerState& l = s.layers[size_t(k.layer)];
  PleCarry* c = nullptr;
  switch (k.kind) {
    case FieldKind::h: return &l.h;
    case FieldKind::conv: return &l.conv;
    case FieldKind::h_checkpoint: return opt(l.h_checkpoint);
    case FieldKind::conv_checkpoint: return opt(l.conv_checkpoint);
    case FieldKind::h_intermediate: return at(l.h_intermediates, k.index);
    case FieldKind::conv_intermediate: return at(l.conv_intermediates, k.index);
    case FieldKind::ple_history: return (c = carry(l.ple)) ? &c->history : nullptr;
    case FieldKind::ple_conv: return (c = carry(l.ple)) ? &c->conv : nullptr;
    case FieldKind::ple_checkpoint_history: return (c = carry(l.ple_checkpoint)) ? &c->history : nullptr;
    case FieldKind::ple_checkpoint_conv: return (c = carry(l.ple_checkpoint)) ? &c->conv : nullptr;
    case FieldKind::ple_snapshot_history: return (c = at(l.ple_snapshots, k.index)) ? &c->history : nullptr;
    case FieldKind::ple_snapshot_conv: return (c = at(l.ple_snapshots, k.index)) ? &c->conv : nullptr;
    default: throw std::logic_error("unknown field kind " + std::to_string(int(k.kind)));
  }
}
}  // namespace

Tensor& field_tensor(SequenceState& s, const FieldKey& k) { return *locate(s, k, true); }

Tensor* find_field(SequenceState& s, const FieldKey& k) { return locate(s, k, false); }
// locate without creating changes nothing: reading a const state through it is safe
const Tensor* find_field(const SequenceState& s, const FieldKey& k) {
  return locate(const_cast<SequenceState&>(s), k, false);
}

uint64_t rest_digest(const SequenceState& s) {
  StateHasher h;
  h.add(int64_t(s.last_verify_k));
  h.add(int64_t(s.layers.size()));
  for (const LayerState& l : s.layers) {
    h.add(int64_t(l.h_is_f16));
    h.add(l.condition.h);
    h.add(l.condition.h_checkpoint);
    h.add(l.condition.h_intermediates);
    h.add(int64_t(l.conv_oldest_column_absent));
  }
  h.add(int64_t(s.prefill_stage_absent));
  return h.digest();
}

FieldDigests field_digests(const SequenceState& s) {
  FieldDigests d;
  for_each_field(s, [&](const FieldKey& k, const Tensor& t) { d.push_back({k, tensor_digest(t)}); });
  d.push_back({FieldKey{FieldKind::rest, -1, 0}, rest_digest(s)});
  return d;
}

uint64_t combined_digest(const FieldDigests& d) {
  StateHasher h;
  h.add(int64_t(d.size()));
  for (const FieldDigest& f : d) {
    h.add(int64_t(f.key.kind));
    h.add(int64_t(f.key.layer));
    h.add(int64_t(f.key.index));
    h.add(int64_t(f.digest));
  }
  return h.digest();
}

std::set<FieldKey> carry_unchanged_fields(SequenceState& previous, const FieldDigests& before,
                                          const FieldDigests& now, SequenceState& out) {
  std::map<FieldKey, uint64_t> was;
  for (const FieldDigest& f : before) was.emplace(f.key, f.digest);
  std::set<FieldKey> carried;
  for (const FieldDigest& f : now) {
    if (f.key.kind == FieldKind::rest) continue;
    const auto it = was.find(f.key);
    if (it == was.end() || it->second != f.digest) continue;
    Tensor* t = find_field(previous, f.key);
    if (!t) continue;
    field_tensor(out, f.key) = std::move(*t);
    carried.insert(f.key);
  }
  return carried;
}

std::map<FieldKey, Tensor> take_fields(SequenceState& previous) {
  std::vector<FieldKey> keys;
  for_each_field(previous, [&](const FieldKey& k, const Tensor& t) {
    if (!t.empty()) keys.push_back(k);
  });
  std::map<FieldKey, Tensor> taken;
  for (const FieldKey& k : keys) taken.emplace(k, std::move(*find_field(previous, k)));
  return taken;
}

bool carried_as_is(const std::set<FieldKey>& carried, const FieldKey& k, const Tensor& t, DType dtype,
                   const std::vector<int64_t>& shape) {
  return carried.count(k) && t.dtype() == dtype && t.shape() == shape;
}

}  // namespace ssm
