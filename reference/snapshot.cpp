// Reference prefix-cache snapshots: copies of live h and conv of every layer to and from a
// pool-level snapshot slot. Counterpart: cuda/copies.cu.
#include "reference/reference_backend.h"

namespace ssm::ref {

void ReferenceBackend::snapshot_save(int slot, int snap) {
  contract_.check_snapshot(OpKind::snapshot_save, slot, snap);
  Snapshot s;
  for (const LayerSlot& L : slots_[size_t(slot)].layers) {
    s.h.push_back(L.h);
    s.conv.push_back(L.conv);
    s.ple.push_back(L.ple);
  }
  snapshots_[size_t(snap)] = std::move(s);
  contract_.on_snapshot_save(slot, snap);
}

void ReferenceBackend::snapshot_restore(int slot, int snap) {
  contract_.check_snapshot(OpKind::snapshot_restore, slot, snap);
  const Snapshot& s = snapshots_[size_t(snap)];
  auto& layers = slots_[size_t(slot)].layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    layers[l].h = s.h[l];
    layers[l].conv = s.conv[l];
    layers[l].ple = s.ple[l];
  }
}

}  // namespace ssm::ref
