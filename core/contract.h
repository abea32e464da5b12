// Host bookkeeping of the op contract (STATE-MODEL sections 4-6): per-slot metadata and the
// checks every backend runs BEFORE touching state, so that a failing op changes nothing.
// Each backend owns one Contract; checks are const and throw StateError, effects are applied
// only after the op's data movement succeeded.
#pragma once
#include <vector>

#include "core/errors.h"
#include "core/model.h"
#include "core/op.h"
#include "core/state.h"
#include "core/tensor.h"

namespace ssm {

struct SlotMeta {
  bool claimed = false;
  bool h_is_f16 = false;
  bool has_h_checkpoint = false, has_conv_checkpoint = false;
  DType h_checkpoint_dtype = DType::f32;  // dtype of the bytes the h checkpoint holds
  int last_verify_k = 0;                  // 0: no verify since alloc
  DType intermediate_dtype = DType::f32;  // dtype h had when the last verify wrote them
  DType h_dtype() const { return h_is_f16 ? DType::f16 : DType::f32; }
};

struct SnapshotMeta {
  bool saved = false;
  DType h_dtype = DType::f32;
};

class Contract {
 public:
  Contract() = default;
  Contract(const ModelSpec& spec, const PoolConfig& pool);

  const PoolConfig& pool() const { return pool_; }
  const ModelSpec& spec() const { return spec_; }
  int dummy_slot() const { return pool_.max_slots; }
  const SlotMeta& slot(int s) const { return slots_.at(size_t(s)); }
  const SnapshotMeta& snapshot(int i) const { return snaps_.at(size_t(i)); }

  // Checks (throw StateError; never modify anything).
  int check_alloc(int min_capacity) const;  // returns the slot to claim
  void check_claimed(const char* op, int slot) const;
  void check_prefill(int slot, const StepInputs& in) const;
  // slots may hold kPadRow; rows = 1 for decode, K for verify. check_batch_slots checks
  // everything but the inputs; check_batch checks both.
  void check_batch_slots(OpKind op, const std::vector<int>& slots, int rows) const;
  void check_batch(OpKind op, const std::vector<int>& slots, int rows,
                   const std::vector<StepInputs>& in) const;
  void check_commit(int slot, int n, int k) const;
  void check_rollback(OpKind op, int slot, int n) const;
  void check_to_f16(int slot) const;
  void check_snapshot(OpKind op, int slot, int snap) const;

  // f16 mode: a decode or verify on FP32 h converts it first (the engine's first decode step).
  bool needs_to_f16(int slot) const;
  // A prefill in f16 mode on FP16 h widens it back to FP32 first.
  bool prefill_widens(int slot) const;

  // Effects, after success.
  void on_alloc(int slot);
  void on_release(int slot);
  void on_prefill(int slot);
  void on_to_f16(int slot);
  void on_verify(int slot, int k);
  void on_checkpoint(int slot);
  void on_snapshot_save(int slot, int snap);

  // A recorded state imported into a free slot (Backend::import_state): checks that `state` fits
  // this model and slot (every layer, shapes, dtypes, counts) and returns the slot's metadata;
  // throws std::invalid_argument naming the slot, layer and field. on_import claims the slot with it.
  SlotMeta check_import(int slot, const SequenceState& state) const;
  void on_import(int slot, const SlotMeta& meta);

 private:
  ModelSpec spec_;
  PoolConfig pool_;
  std::vector<SlotMeta> slots_;  // max_slots + 1 (the dummy)
  std::vector<SnapshotMeta> snaps_;
};

}  // namespace ssm
