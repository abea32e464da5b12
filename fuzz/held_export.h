// One side's last export of one sequence, kept by the lockstep between ops and brought up to date
// by reading only the fields that changed (Backend::field_digests, Backend::export_update): after
// a decode of a real shape with a checkpoint and a verify's intermediates, h and the conv window
// are read back and copied, not the checkpoint or the intermediates. A backend without field
// digests (a plug-in) is exported whole and hashed after every op, as before.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include "core/backend.h"
#include "core/state_fields.h"

namespace ssm::fuzz {

class HeldExport {
 public:
  // The slot's digest now (the combined digest of its fields, core/state_fields.h): from the
  // backend's field digests when it has them, else by exporting the slot (then `state` returns
  // that export).
  uint64_t digest(Backend& b, int slot);
  // What export_state(slot) returns now: the held export updated field by field, or exported
  // afresh (no export held, another slot, or a backend without field digests). Call after digest,
  // with no op in between.
  const SequenceState& state(Backend& b, int slot);
  // After state(): the backend's digest of each tensor field of that export, by the tensor's
  // address (compare/field_cache.h); empty for a backend without field digests.
  std::map<const Tensor*, uint64_t> known_digests();
  // Host bytes of the export held (0 when none); drop() lets it go (the next state() exports afresh).
  size_t bytes() const;
  void drop();

 private:
  std::optional<SequenceState> held_;
  int slot_ = -1;
  std::optional<FieldDigests> held_digests_;  // the field digests of held_, when the backend has them
  std::optional<FieldDigests> now_;           // digest()'s, until state() brings held_ up to them
  bool current_ = false;                      // held_ is the export digest() saw
};

}  // namespace ssm::fuzz
