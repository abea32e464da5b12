// Reference decode: one token per sequence, batched over slots. Padding rows are checked by the
// contract and then skipped: their outputs (zeros here) and the dummy slot's state are undefined
// and never compared, so computing them would only cost (most rows of a wide batch are padding).
// In f16 mode a decode on FP32 h converts it first (to_f16 on the first decode step).
// Every layer kind (reference/layer_step.h). Counterpart: cuda/gdn_decode.cu.
#include "reference/layer_step.h"
#include "reference/layer_parallel.h"
#include "reference/ple_math.h"
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::step(int slot, const StepInputs& in, int row, StepOutputs& out) {
  Slot& s = slots_[size_t(slot)];
  for_each_layer(model_.spec.layers, [&](size_t l) {
    const LayerSpec& ls = model_.spec.layers[l];
    const LayerRows& r = in.layers[l];
    const size_t t = size_t(row);
    LayerSlot& L = s.layers[l];
    // F16Rows::carried: the op's first row widens the stored FP16 state; its rows then carry FP32
    const bool carried = ls.numerics.f16_rows == F16Rows::carried && L.h.value.dtype() == DType::f16;
    if (carried && row == 0) L.carry = widen_to_f32(L.h.value);
    layer_step(ls, model_.weights[l], L.h.value, L.conv.f32(), r, t, out.layers[l].data() + t * size_t(ls.out_dim()),
               out.condition[l].data() + t * size_t(ls.out_dim()), &L.h.cond, carried ? &L.carry : nullptr);
    ple_step(l, L, r, row, out);
  });
}

void ReferenceBackend::ple_step(size_t l, LayerSlot& L, const LayerRows& r, int row, StepOutputs& out) const {
  const LayerSpec& ls = model_.spec.layers[l];
  if (!ls.ple.hosted()) return;
  if (!L.ple) L.ple = fresh_ple_carry(ls);  // created on first use
  const size_t t = size_t(row), C = size_t(ls.ple.channels);
  ple_row(ls, model_.weights[l], *L.ple, r, t, out.ple[l].data() + t * C, out.ple_condition[l].data() + t * C);
}

std::vector<StepOutputs> ReferenceBackend::decode(const std::vector<int>& slots,
                                                  const std::vector<StepInputs>& in) {
  contract_.check_batch(OpKind::decode, slots, 1, in);
  std::vector<StepOutputs> outs;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == kPadRow) {  // undefined outputs and dummy state (STATE-MODEL 4): not computed, zeros
      outs.push_back(empty_outputs(model_.spec, 1));
      continue;
    }
    const int slot = slots[i];
    if (contract_.needs_to_f16(slot)) convert_h_to_f16(slot);
    outs.push_back(empty_outputs(model_.spec, 1));
    step(slot, in[i], 0, outs.back());
  }
  return outs;
}

}  // namespace ssm::ref
