// One side's last export of one sequence (see held_export.h).
#include "fuzz/held_export.h"

#include <utility>

#include "core/state_digest.h"

namespace ssm::fuzz {

uint64_t HeldExport::digest(Backend& b, int slot) {
  if (std::optional<FieldDigests> d = b.field_digests(slot)) {
    current_ = held_ && slot_ == slot && held_digests_ && *held_digests_ == *d;
    now_ = std::move(d);
    return combined_digest(*now_);
  }
  held_ = b.export_state(slot);
  slot_ = slot;
  held_digests_.reset();
  now_.reset();
  current_ = true;
  return state_digest(*held_);
}

const SequenceState& HeldExport::state(Backend& b, int slot) {
  if (!current_ || slot_ != slot) {
    try {
      if (held_ && slot_ == slot && held_digests_ && now_)
        b.export_update(slot, *held_digests_, *now_, *held_);
      else
        held_ = b.export_state(slot);
    } catch (...) {
      held_.reset();  // an update that failed half way may have moved fields out of it
      throw;
    }
    slot_ = slot;
    held_digests_ = std::move(now_);
    now_.reset();
    current_ = true;
  }
  return *held_;
}

size_t HeldExport::bytes() const {
  size_t n = 0;
  if (held_) for_each_field(*held_, [&](const FieldKey&, const Tensor& t) { n += t.bytes(); });
  return n;
}

void HeldExport::drop() {
  held_.reset();
  held_digests_.reset();
  current_ = false;
}

std::map<const Tensor*, uint64_t> HeldExport::known_digests() {
  std::map<const Tensor*, uint64_t> known;
  if (!current_ || !held_ || !held_digests_) return known;
  for (const FieldDigest& f : *held_digests_)
    if (const Tensor* t = find_field(*held_, f.key)) known.emplace(t, f.digest);
  return known;
}

}  // namespace ssm::fuzz
