// Reference adoption of another side's elements (Backend::adopt_elements): the model side's half
// of FP16's overflow threshold between two agreeing states (core/overflow_straddle.h). Only the
// values change: every condition stays as it is, since the adopted value agreed with the
// reference's under it.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "reference/reference_backend.h"

namespace ssm::ref {

bool ReferenceBackend::adopt_elements(int slot, const SequenceState& from, const std::vector<StateElement>& which) {
  if (which.empty()) return true;
  const std::vector<std::pair<FieldKey, const Tensor*>> fields = export_fields(slot);
  for (const StateElement& e : which) {
    const auto it = std::find_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == e.field; });
    const Tensor* src = find_field(from, e.field);
    const std::string where = "adopt_elements: element " + std::to_string(e.index) + " of field kind " +
                              std::to_string(int(e.field.kind)) + " (layer " + std::to_string(e.field.layer) +
                              ", index " + std::to_string(e.field.index) + ") of slot " + std::to_string(slot);
    if (it == fields.end()) throw std::invalid_argument(where + ": the slot has no such field");
    // the slot's own storage, reached through the list of its fields: this object is not const
    Tensor& dst = const_cast<Tensor&>(*it->second);
    if (!src || src->dtype() != dst.dtype() || src->shape() != dst.shape())
      throw std::invalid_argument(where + ": the state it comes from has no field of the same dtype and shape");
    if (e.index < 0 || e.index >= dst.size())
      throw std::invalid_argument(where + ": past the field's " + std::to_string(dst.size()) + " elements");
    if (dst.dtype() == DType::f32) dst.f32()[e.index] = src->f32()[e.index];
    else dst.f16()[e.index] = src->f16()[e.index];
  }
  return true;
}

}  // namespace ssm::ref
