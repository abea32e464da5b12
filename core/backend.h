// The one interface both implementations satisfy (reference/ on the CPU, cuda/ on a GPU).
// Slots are pool slot indexes; batch ops take kPadRow for padding rows (run on the dummy slot).
// Every op validates through its Contract first and throws StateError before changing state.
#pragma once
#include <memory>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/op.h"
#include "core/overflow_straddle.h"
#include "core/state.h"
#include "core/state_fields.h"

namespace ssm {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // What determines this implementation's numerics, as one line: a digest of the code that
  // computes them (cmake/numerics.cmake) and what it runs on ("reference numerics:1a2b... glibc
  // 2.36", "cuda kernels:3c4d... sm_90 x132"). A trace recorded with the same line replays bit for
  // bit (replay/replay.h). "": unknown; the executable's identity (formats/dump.h build_id) stands in.
  virtual std::string numerics_id() const { return ""; }

  // Replaces any previous pool. Throws std::invalid_argument for a bad model or config.
  virtual void create_pool(const Model& model, const PoolConfig& pool) = 0;

  virtual int alloc(int min_capacity) = 0;  // returns the claimed, zeroed slot
  virtual void release(int slot) = 0;
  virtual StepOutputs prefill(int slot, const StepInputs& in) = 0;
  virtual std::vector<StepOutputs> decode(const std::vector<int>& slots,
                                          const std::vector<StepInputs>& in) = 0;
  virtual std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                          const std::vector<StepInputs>& in) = 0;
  virtual void checkpoint(int slot, bool async) = 0;
  virtual void commit(int slot, int n, int k) = 0;
  // and_checkpoint: rollback_and_checkpoint_async (second stream; checkpoint <- rolled-back live).
  virtual void rollback(int slot, int n, bool and_checkpoint) = 0;
  virtual void to_f16(int slot) = 0;
  virtual void snapshot_save(int slot, int snap) = 0;
  virtual void snapshot_restore(int slot, int snap) = 0;

  // Full state of a claimed slot, every layer (waits for outstanding async copies).
  virtual SequenceState export_state(int slot) = 0;
  // The reverse: claims the free slot `slot` with `state` (every layer; its checkpoints and
  // intermediates as present; an absent stage is zero), for a replay that starts from a recorded
  // state (replay/start_point.h). The state carries no condition: the reference starts it fresh.
  // Throws std::invalid_argument for a state that does not fit; a backend that cannot import
  // refuses by name (the default).
  virtual void import_state(int /*slot*/, const SequenceState& /*state*/) {
    throw std::invalid_argument(name() +
                                " cannot import a recorded state (Backend::import_state): replay it from op 0");
  }
  // The digest of every field of what export_state(slot) would return (core/state_fields.h),
  // computed without exporting, for backends that can (the reference hashes its state in place, the
  // CUDA backend on the device); nullopt: the caller exports and hashes. Equal digests of one slot's
  // field mean an unchanged field (up to a 64-bit hash collision); the values are the backend's own,
  // comparable only with its earlier digests. Waits for outstanding async copies, as export_state.
  virtual std::optional<FieldDigests> field_digests(int /*slot*/) { return std::nullopt; }
  // Brings `state`, an export of this slot taken when field_digests(slot) gave `before`, up to what
  // export_state(slot) returns now, `now` being field_digests(slot) taken since the last op: a field
  // whose digest is unchanged is kept as it is, only the others are read (the default exports
  // afresh, as a backend without field digests must).
  virtual void export_update(int slot, const FieldDigests& /*before*/, const FieldDigests& /*now*/,
                             SequenceState& state) {
    state = export_state(slot);
  }

  // Sets the elements `which` of a claimed slot's state to their values in `from`, an export of the
  // same sequence that a comparison found to agree with this slot's: the model side's half of FP16's
  // overflow threshold (core/overflow_straddle.h), so that both sides go on from one conversion.
  // False: the backend cannot (the default; then the next op is judged as it comes).
  virtual bool adopt_elements(int /*slot*/, const SequenceState& /*from*/, const std::vector<StateElement>& /*which*/) {
    return false;
  }

  // Test hooks of the async path, with defaults for backends that have none.
  // An async copy of the slot is in flight: its next reader must wait for it.
  virtual bool async_pending(int /*slot*/) const { return false; }
  // While on, every async copy is held until its reader waits for it, so a reader that skips
  // the wait reads stale bytes deterministically (docs/fuzzing.md). False: no async path.
  virtual bool pause_async_copies(bool /*on*/) { return false; }
  // Schedule perturbation (docs/cuda.md, "Perturbed schedules"): from the next create_pool on, run
  // blocks in seeded orders over several waves and delay copies, so that order- and wave-dependent
  // bugs show on every run; the plan depends on the seed and the ops since create_pool alone.
  // False: the implementation offers no such mode.
  virtual bool perturb_schedule(uint64_t /*seed*/) { return false; }
};

}  // namespace ssm
