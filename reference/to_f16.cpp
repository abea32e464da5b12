// Reference to_f16: convert FP32 h of every layer to FP16 with the converter (round to
// nearest even, no saturation), out of place, and set h_is_f16. Counterpart: cuda/to_f16.cu.
#include <algorithm>
#include <utility>

#include "reference/branches.h"
#include "reference/layer_parallel.h"
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::convert_h_to_f16(int slot) {
  std::vector<LayerSlot>& layers = slots_[size_t(slot)].layers;
  // every layer's h in parts of kPart elements, on several threads for a real shape (the
  // overflow counts of convert_to_half are gathered by parallel_parts)
  constexpr int64_t kPart = int64_t(1) << 16;
  std::vector<Tensor> h16(layers.size());
  std::vector<std::pair<size_t, int64_t>> parts;  // (layer, first element)
  int64_t elems = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    h16[l] = Tensor::zeros(DType::f16, layers[l].h.value.shape());
    for (int64_t i = 0; i < h16[l].size(); i += kPart) parts.emplace_back(l, i);
    elems += h16[l].size();
  }
  parallel_parts(int(parts.size()), elems >= kParallelElems, [&](size_t p) {
    const auto [l, first] = parts[p];
    const float* from = layers[l].h.value.f32();
    uint16_t* to = h16[l].f16();
    for (int64_t i = first; i < std::min(first + kPart, h16[l].size()); ++i) to[i] = convert_to_half(from[i]);
  });
  // the condition stays with it: FP16-lineage fields are judged by the FP16 classes anyway
  for (size_t l = 0; l < layers.size(); ++l) layers[l].h.value = std::move(h16[l]);
  if (slot != contract_.dummy_slot()) contract_.on_to_f16(slot);
}

void ReferenceBackend::to_f16(int slot) {
  contract_.check_to_f16(slot);
  convert_h_to_f16(slot);
}

}  // namespace ssm::ref
