// The CPU reference Backend: every transition of STATE-MODEL sections 4-6 on host tensors.
// Method bodies live one transition per file (pool.cpp, decode.cpp, verify.cpp, ...; the kind-specific math behind reference/layer_step.h).
#pragma once
#include <optional>
#include <vector>

#include "core/backend.h"
#include "core/contract.h"
#include "reference/gdn_math.h"
#include "reference/tensor_copies.h"

namespace ssm::ref {

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  std::string numerics_id() const override;  // its sources' digest and the C library's version
  void create_pool(const Model& model, const PoolConfig& pool) override;
  int alloc(int min_capacity) override;
  void release(int slot) override;
  StepOutputs prefill(int slot, const StepInputs& in) override;
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override;
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override;
  void checkpoint(int slot, bool async) override;
  void commit(int slot, int n, int k) override;
  void rollback(int slot, int n, bool and_checkpoint) override;
  void to_f16(int slot) override;
  void snapshot_save(int slot, int snap) override;
  void snapshot_restore(int slot, int snap) override;
  SequenceState export_state(int slot) override;
  void import_state(int slot, const SequenceState& state) override;  // import_state.cpp
  bool adopt_elements(int slot, const SequenceState& from, const std::vector<StateElement>& which) override;
  // field_digests(export_state(slot)), hashed in place
  std::optional<FieldDigests> field_digests(int slot) override;
  void export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) override;

  const Contract& contract() const { return contract_; }
  // The alternate path's hooks (fuzz/alt_reference.h), which rebuilds PLE histories itself: the
  // live PLE carry of a claimed slot's layer (absent: nullopt), and its replacement.
  const std::optional<PleCarry>& ple_carry(int slot, size_t layer) const;
  void set_ple_carry(int slot, size_t layer, const PleCarry& carry);
  const Model& model() const { return model_; }

 private:
  // An h-like value and its condition (reference/gdn_math.h StateCondition: the FP32 error an
  // implementation may carry, carried through the rows), one object so that a copy or a restore
  // can never separate them.
  struct HField {
    Tensor value;  // [nv, kd, vd] in the field's dtype
    StateCondition cond;
    // Queues *this = from (every member) on `copies`, to run with the other copies of an op.
    void queue_copy_from(const HField& from, TensorCopies& copies) {
      copies.add(value, from.value);
      copies.add(cond, from.cond);
    }
  };
  struct LayerSlot {
    HField h;     // in the slot's current h dtype
    Tensor conv;  // [conv_dim, d_conv] f32
    HField h_checkpoint;                     // empty until the first checkpoint
    Tensor conv_checkpoint;
    std::vector<HField> h_intermediates;     // capacity(slot) entries, empty until written
    std::vector<Tensor> conv_intermediates;  // conv_capacity entries
    Tensor carry;  // F16Rows::carried on FP16 h: the FP32 state the rows of the current op carry
    // A layer hosting a PLE carry (STATE-MODEL section 7): absent until its first row
    std::optional<PleCarry> ple, ple_checkpoint;
    std::vector<PleCarry> ple_snapshots;  // the last verify's: snapshot t = the carry after t rows
  };
  struct Slot {
    std::vector<LayerSlot> layers;
    Tensor stage;       // f16-pool: FP32 staging blob shared by the slot's layers
    Tensor stage_cond;  // its condition, element by element (the last layer's h_cond broadcast over kd)
  };
  struct Snapshot {
    std::vector<HField> h;  // per layer
    std::vector<Tensor> conv;
    std::vector<std::optional<PleCarry>> ple;
  };

  // The tensor fields of a claimed slot in export order (core/state_fields.h), with their storage.
  std::vector<std::pair<FieldKey, const Tensor*>> export_fields(int slot) const;
  // The export without its tensor fields: the scalars, flags and per-column conditions.
  SequenceState export_rest(int slot) const;
  // An export whose fields unchanged since `previous` (digests `before` then, `now` now) move over
  // from it and whose other fields are copied (export_state: no previous, every field copied).
  SequenceState export_from(int slot, SequenceState& previous, const FieldDigests& before, const FieldDigests& now) const;
  Slot fresh_slot(int slot) const;  // every field zero, h in the mode's initial dtype
  int slot_index(int slot);  // kPadRow -> the dummy slot, created on first use
  // One token of every layer on a slot, in the slot's h dtype; outputs row `row` of out.
  void step(int slot, const StepInputs& in, int row, StepOutputs& out);
  // Row `row` of a layer's PLE carry, created on first use (a layer hosting none: nothing).
  void ple_step(size_t layer, LayerSlot& L, const LayerRows& r, int row, StepOutputs& out) const;
  void convert_h_to_f16(int slot);  // to_f16 without the checks
  void restore_live(int slot, int n);  // rollback/commit copies, without the checks
  void copy_live_to_checkpoint(int slot);
  static StepOutputs empty_outputs(const ModelSpec& spec, int rows);
  // Intermediate t of a slot's storage, bounds-checked: an op the contract should have refused
  // (a slip in the shared contract) is reported as std::out_of_range naming the slot and the
  // capacity, never undefined behaviour (docs/fuzzing.md, "Legality").
  template <class V>  // std::vector<Tensor> or std::vector<HField>, const or not
  static auto& intermediate(V& v, int t, const char* family, int slot) {
    if (t < 0 || size_t(t) >= v.size()) throw_beyond_capacity(family, t, slot, v.size());
    return v[size_t(t)];
  }
  [[noreturn]] static void throw_beyond_capacity(const char* family, int t, int slot, size_t capacity);

  Model model_;
  Contract contract_;
  std::vector<Slot> slots_;  // max_slots + 1 (the dummy slot last)
  std::vector<Snapshot> snapshots_;
};

}  // namespace ssm::ref
