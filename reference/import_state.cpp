// Reference import of a recorded state into a free slot (Backend::import_state): the start of a
// replay from a recorded state (replay/start_point.h). Counterparts: pool.cpp (alloc, export),
// cuda/import_state.cpp.
#include "reference/reference_backend.h"
#include "reference/layer_step.h"

namespace ssm::ref {

// The recorded state carries no condition (HCondition): every h-like field starts from a fresh
// one, as a newly claimed slot does, so the tolerances after the start are those of a fresh state
// carried from there (never looser than a replay from op 0).
void ReferenceBackend::import_state(int slot, const SequenceState& st) {
  const SlotMeta meta = contract_.check_import(slot, st);
  Slot s = fresh_slot(slot);
  for (size_t l = 0; l < s.layers.size(); ++l) {
    const LayerSpec& ls = model_.spec.layers[l];
    const LayerState& in = st.layers[l];
    LayerSlot& L = s.layers[l];
    L.h.value = in.h;
    L.conv = in.conv;
    if (in.h_checkpoint) {
      L.h_checkpoint.value = *in.h_checkpoint;
      L.h_checkpoint.cond = fresh_state_condition(ls);
    }
    if (in.conv_checkpoint) L.conv_checkpoint = *in.conv_checkpoint;
    for (size_t t = 0; t < in.h_intermediates.size(); ++t) {
      L.h_intermediates.at(t).value = in.h_intermediates[t];
      L.h_intermediates.at(t).cond = fresh_state_condition(ls);
      L.conv_intermediates.at(t) = in.conv_intermediates[t];
    }
    if (ls.ple.hosted()) {
      L.ple = in.ple;
      L.ple_checkpoint = in.ple_checkpoint;
      L.ple_snapshots = in.ple_snapshots;
    }
  }
  if (st.h_prefill_stage && contract_.pool().h_mode == HMode::f16_pool) s.stage = *st.h_prefill_stage;
  slots_[size_t(slot)] = std::move(s);
  contract_.on_import(slot, meta);
}

}  // namespace ssm::ref
