// Reference verify(K): K rows per sequence on the live state; after row t (t = 0..K-2) the
// state is copied to intermediates[t]. FP16 h is rounded at each row's store, so intermediates
// equal the carried state bit for bit. Both arms have the same reference (the WY arm is
// tolerance-equal on the GPU). Padding rows are skipped as in decode (reference/decode.cpp).
// Counterparts: cuda/gdn_decode.cu (exact arm), cuda/gdn_verify_wy.cu.
#include "reference/gdn_math.h"
#include "reference/reference_backend.h"

namespace ssm::ref {

std::vector<StepOutputs> ReferenceBackend::verify(const std::vector<int>& slots, int k, VerifyArm,
                                                  const std::vector<StepInputs>& in) {
  contract_.check_batch(OpKind::verify, slots, k, in);
  // the storage itself refuses what the contract let through, before anything changes
  for (int s : k >= 2 ? slots : std::vector<int>{})
    for (LayerSlot& L : slots_[size_t(slot_index(s))].layers) {
      intermediate(L.h_intermediates, k - 2, "h", slot_index(s));
      intermediate(L.conv_intermediates, k - 2, "conv", slot_index(s));
    }
  std::vector<StepOutputs> outs;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == kPadRow) {  // undefined outputs and dummy state (as in decode): not computed, zeros
      outs.push_back(empty_outputs(model_.spec, k));
      continue;
    }
    const int slot = slots[i];
    if (contract_.needs_to_f16(slot)) convert_h_to_f16(slot);
    outs.push_back(empty_outputs(model_.spec, k));
    Slot& s = slots_[size_t(slot)];
    // PLE snapshots are indexed by kept rows: snapshot t is the carry after t rows (0: before)
    for (size_t l = 0; l < s.layers.size(); ++l) {
      LayerSlot& L = s.layers[l];
      L.ple_snapshots.clear();
      if (!model_.spec.layers[l].ple.hosted()) continue;
      if (!L.ple) L.ple = fresh_ple_carry(model_.spec.layers[l]);  // created on first use
      L.ple_snapshots.push_back(*L.ple);
    }
    for (int t = 0; t < k; ++t) {
      step(slot, in[i], t, outs.back());
      if (t > k - 2) continue;
      TensorCopies copies;
      for (LayerSlot& L : s.layers) {
        intermediate(L.h_intermediates, t, "h", slot).queue_copy_from(L.h, copies);
        copies.add(intermediate(L.conv_intermediates, t, "conv", slot), L.conv);
        if (L.ple) L.ple_snapshots.push_back(*L.ple);
      }
      copies.run();
    }
    if (slots[i] != kPadRow) contract_.on_verify(slot, k);
  }
  return outs;
}

}  // namespace ssm::ref
