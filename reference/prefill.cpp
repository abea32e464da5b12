// Reference prefill: T tokens in FP32. f16 mode widens FP16 h back to FP32 first (exact) and
// clears h_is_f16; f16-pool widens each layer into the slot's FP32 stage, runs there, and
// narrows back with the converter (round to nearest even, no saturation).
// Counterpart: cuda/gdn_decode.cu (the row kernel over T rows), cuda/engine.cpp (widen/narrow).
#include "reference/branches.h"
#include "reference/layer_step.h"
#include "reference/layer_parallel.h"
#include "reference/reference_backend.h"

namespace ssm::ref {

StepOutputs ReferenceBackend::prefill(int slot, const StepInputs& in) {
  contract_.check_prefill(slot, in);
  const HMode mode = contract_.pool().h_mode;
  Slot& s = slots_[size_t(slot)];
  StepOutputs out = empty_outputs(model_.spec, in.rows);
  std::vector<Tensor> works(s.layers.size());  // each layer's FP32 result (layers may run on several threads)
  for_each_layer(model_.spec.layers, [&](size_t l) {
    const LayerSpec& ls = model_.spec.layers[l];
    LayerSlot& L = s.layers[l];
    Tensor work = L.h.value.dtype() == DType::f16 ? widen_to_f32(L.h.value) : L.h.value;  // FP32 working h
    const LayerRows& r = in.layers[l];
    for (int t = 0; t < in.rows; ++t) {
      const size_t tt = size_t(t);
      layer_step(ls, model_.weights[l], work, L.conv.f32(), r, tt, out.layers[l].data() + tt * size_t(ls.out_dim()),
                 out.condition[l].data() + tt * size_t(ls.out_dim()), &L.h.cond);
      ple_step(l, L, r, t, out);
    }
    works[l] = std::move(work);
  });
  for (size_t l = 0; l < s.layers.size(); ++l) {  // in layer order: the stage is shared
    const LayerSpec& ls = model_.spec.layers[l];
    LayerSlot& L = s.layers[l];
    Tensor& work = works[l];
    if (mode == HMode::f16_pool) {
      // the stage holds this layer's FP32 result until the next layer widens into it
      std::copy(work.f32(), work.f32() + work.size(), s.stage.f32());
      if (L.h.cond.rho.size() > 0) {
        const Tensor stage_cond = broadcast_condition(L.h.cond.rho, h_shape(ls));
        std::copy(stage_cond.f32(), stage_cond.f32() + stage_cond.size(), s.stage_cond.f32());
      } else {  // a state without a condition (Mamba-2): no slack beyond the fixed limits
        std::fill(s.stage_cond.f32(), s.stage_cond.f32() + work.size(), 0.0f);
      }
      for (int64_t i = 0; i < work.size(); ++i) L.h.value.f16()[i] = convert_to_half(work.f32()[i]);
    } else {
      L.h.value = std::move(work);  // f16 mode: h is FP32 again until the next decode converts it
    }
  }
  contract_.on_prefill(slot);
  return out;
}

}  // namespace ssm::ref
