// The fields of a sequence's exported state, each named by a key and hashed on its own, so that a
// caller that holds an earlier export of a slot has only the fields that changed since read again
// (Backend::field_digests and Backend::export_update; the lockstep's held exports,
// fuzz/held_export.h). After a decode of a sequence that has a checkpoint and a verify's
// intermediates, only h and the conv window are read back and copied, not the other fields.
//
// A state's fields: per layer h, conv, the checkpoints, the intermediates and the PLE carries'
// tensors, then the f16-pool stage and its condition; `rest` is everything else compare_state reads
// (the scalars and flags and the per-column conditions, [nv][vd] per h-like field), hashed as one.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "core/state.h"
#include "core/tensor.h"

namespace ssm {

enum class FieldKind : int {
  h,
  conv,
  h_checkpoint,
  conv_checkpoint,
  h_intermediate,     // index: t of the last verify (0 .. K-2)
  conv_intermediate,  // index: t
  ple_history,
  ple_conv,
  ple_checkpoint_history,
  ple_checkpoint_conv,
  ple_snapshot_history,  // index: t (0 .. K-1)
  ple_snapshot_conv,     // index: t
  stage,                 // layer -1: the f16-pool staging blob
  stage_condition,       // layer -1: its condition, element by element
  rest,                  // layer -1: everything that is no tensor field
};

struct FieldKey {
  FieldKind kind = FieldKind::rest;
  int layer = -1;
  int index = 0;
  bool operator==(const FieldKey& o) const { return kind == o.kind && layer == o.layer && index == o.index; }
  bool operator<(const FieldKey& o) const;
};

struct FieldDigest {
  FieldKey key;
  uint64_t digest = 0;  // the backend's own digest of the field's dtype, shape and bits (not its key)
  bool operator==(const FieldDigest& o) const { return key == o.key && digest == o.digest; }
};
// Every field of a state, `rest` last; comparable only with the same backend's earlier digests.
using FieldDigests = std::vector<FieldDigest>;

// Calls f on every tensor field of an exported state, in export order (`rest` is not a tensor).
void for_each_field(const SequenceState& s, const std::function<void(const FieldKey&, const Tensor&)>& f);
// The tensor a key names in `s`: created when `s` lacks it (an optional emplaced, a list grown), so
// that an export can be built field by field; find_field does not create (null when absent).
Tensor& field_tensor(SequenceState& s, const FieldKey& k);
Tensor* find_field(SequenceState& s, const FieldKey& k);
const Tensor* find_field(const SequenceState& s, const FieldKey& k);

// XXH3 of everything compare_state reads that is no tensor field (the scalars, flags and
// per-column conditions), from an export (its tensor fields are not read).
uint64_t rest_digest(const SequenceState& s);
// An export's field digests: tensor_digest (core/state_digest.h: dtype, shape and bits, not the
// field's place, so equal contents in two fields have equal digests) of each tensor field in export
// order, then `rest`.
FieldDigests field_digests(const SequenceState& s);
// One digest of a list of field digests (their keys, order and digests).
uint64_t combined_digest(const FieldDigests& d);

// The start of export_update: moves into `out` (a fresh export with its rest filled in) the tensors
// of `previous` (an export taken when the slot's digests were `before`) whose fields are in `now`
// with the same digest, and returns their keys; the caller reads every other field, and every
// carried one whose dtype or shape is not the field's now (carried_as_is).
std::set<FieldKey> carry_unchanged_fields(SequenceState& previous, const FieldDigests& before,
                                          const FieldDigests& now, SequenceState& out);
// The tensor fields left in `previous` after carry_unchanged_fields (the changed ones), moved out
// by key: storage an update writes the changed fields into instead of allocating new host memory
// (its first touch, page by page, was most of a real-shape update's reading back). A caller uses
// one only where its dtype and shape are the field's now, and overwrites every element.
std::map<FieldKey, Tensor> take_fields(SequenceState& previous);
// A field of `out` that carry_unchanged_fields carried over and that has the given dtype and shape.
bool carried_as_is(const std::set<FieldKey>& carried, const FieldKey& k, const Tensor& t, DType dtype,
                   const std::vector<int64_t>& shape);

}  // namespace ssm
