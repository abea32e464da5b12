// Reference rollback(n) and rollback_and_checkpoint_async(n): n == 0 restores the checkpoint
// (each half only if allocated), n >= 1 restores intermediates[n-1] of the last verify (and PLE
// snapshot n, STATE-MODEL section 7); the
// _and_checkpoint variant then copies the rolled-back live state to the checkpoint.
// Counterpart: cuda/copies.cu.
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::restore_live(int slot, int n) {
  const SlotMeta& m = contract_.slot(slot);
  TensorCopies copies;
  for (LayerSlot& L : slots_[size_t(slot)].layers) {
    if (n == 0) {
      if (m.has_h_checkpoint) L.h.queue_copy_from(L.h_checkpoint, copies);
      if (m.has_conv_checkpoint) {
        copies.add(L.conv, L.conv_checkpoint);
        copies.add_task(0, [&L] { L.ple = L.ple_checkpoint; });  // absent when the carry was absent then
      }
    } else {
      L.h.queue_copy_from(intermediate(L.h_intermediates, n - 1, "h", slot), copies);
      copies.add(L.conv, intermediate(L.conv_intermediates, n - 1, "conv", slot));
      // the carry after n kept rows; its history is the pre-verify history plus the first n tokens
      if (!L.ple_snapshots.empty()) {
        const PleCarry& kept = intermediate(L.ple_snapshots, n, "ple", slot);
        copies.add_task(0, [&L, &kept] { L.ple = kept; });
      }
    }
  }
  copies.run();  // every index was found first: an op the contract should have refused changes nothing
}

const std::optional<PleCarry>& ReferenceBackend::ple_carry(int slot, size_t layer) const {
  contract_.check_claimed("ple_carry", slot);
  return slots_[size_t(slot)].layers.at(layer).ple;
}

void ReferenceBackend::set_ple_carry(int slot, size_t layer, const PleCarry& carry) {
  contract_.check_claimed("set_ple_carry", slot);
  slots_[size_t(slot)].layers.at(layer).ple = carry;
}

void ReferenceBackend::rollback(int slot, int n, bool and_checkpoint) {
  contract_.check_rollback(and_checkpoint ? OpKind::rollback_and_checkpoint_async : OpKind::rollback,
                           slot, n);
  restore_live(slot, n);
  if (and_checkpoint) copy_live_to_checkpoint(slot);
}

}  // namespace ssm::ref
