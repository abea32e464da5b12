// Reference adoption of another side's elements (Backend::adopt_elements): the model side's half
// of FP16's overflow threshold between two agreeing states (core/overflow_straddle.h). Only the
// values change: every condition stays as it is, since the adopted value agreed with the
// reference's under it.
#include <stdexcept>

#include <fmt/format.h>

#include "reference/reference_backend.h"

namespace ssm::ref {

bool ReferenceBackend::adopt_elements(int slot, const SequenceState& from, const std::vector<StateElement>& which) {
  if (which.empty()) return true;
  SequenceState source = from;  // find_field takes a mutable state; the copy is read only
  for (const auto& [key, stored] : export_fields(slot)) {
    const Tensor* src = find_field(source, key);
    // the slot's own storage, reached through the list of its fields: this object is not const
    Tensor& dst = const_cast<Tensor&>(*stored);
    for (const StateElement& e : which) {
      if (!(e.field == key)) continue;
      if (!src || src->dtype() != dst.dtype() || src->shape() != dst.shape() || e.index < 0 || e.index >= dst.size())
        throw std::invalid_argument(
            fmt::format("adopt_elements: element {} of field kind {} layer {} index {} does "
                        "not match slot {}'s field",
                        e.index, int(key.kind), key.layer, key.index, slot));
      if (dst.dtype() == DType::f32) dst.f32()[e.index] = src->f32()[e.index];
      else dst.f16()[e.index] = src->f16()[e.index];
    }
  }
  return true;
}

}  // namespace ssm::ref
