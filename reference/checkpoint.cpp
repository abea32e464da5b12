// Reference checkpoint and checkpoint_async: copy live h and conv of every layer to the
// checkpoint buffers. On the host the async variant has the same result; ordering is the
// CUDA side's problem. Counterpart: cuda/copies.cu.
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::copy_live_to_checkpoint(int slot) {
  TensorCopies copies;
  for (LayerSlot& L : slots_[size_t(slot)].layers) {
    L.h_checkpoint.queue_copy_from(L.h, copies);
    copies.add(L.conv_checkpoint, L.conv);
    L.ple_checkpoint = L.ple;
  }
  copies.run();
  contract_.on_checkpoint(slot);
}

void ReferenceBackend::checkpoint(int slot, bool async) {
  contract_.check_claimed(async ? "checkpoint_async" : "checkpoint", slot);
  copy_live_to_checkpoint(slot);
}

}  // namespace ssm::ref
