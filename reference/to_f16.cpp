// Reference to_f16: convert FP32 h of every layer to FP16 with the converter (round to
// nearest even, no saturation), out of place, and set h_is_f16. Counterpart: cuda/to_f16.cu.
#include "reference/branches.h"
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::convert_h_to_f16(int slot) {
  for (LayerSlot& L : slots_[size_t(slot)].layers) {
    // the condition stays with it: FP16-lineage fields are judged by the FP16 classes anyway
    Tensor h16 = Tensor::zeros(DType::f16, L.h.value.shape());
    for (int64_t i = 0; i < L.h.value.size(); ++i) h16.f16()[i] = convert_to_half(L.h.value.f32()[i]);
    L.h.value = std::move(h16);
  }
  if (slot != contract_.dummy_slot()) contract_.on_to_f16(slot);
}

void ReferenceBackend::to_f16(int slot) {
  contract_.check_to_f16(slot);
  convert_h_to_f16(slot);
}

}  // namespace ssm::ref
