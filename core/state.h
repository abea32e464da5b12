// The exported state of one (sequence, layer) and of one sequence (STATE-MODEL section 2).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/tensor.h"

namespace ssm {

// The model side's bound on the FP32 rounding error an implementation may carry in each h-like
// field, per unit roundoff: [nv][vd] (Mamba-2 [nh][ns]) f32 per field, one value per column of every head (the
// recurrence's condition carried through the rows, docs/tolerances.md "Condition of the state").
// ssmcheck's reference fills it; other implementations leave it empty and are judged by the
// fixed limits alone.
struct HCondition {
  std::optional<Tensor> h, h_checkpoint;
  std::vector<Tensor> h_intermediates;
};

// A field's condition in the field's shape: a per-column condition [nv][vd] of an h-like field
// [nv][kd][vd] (Mamba-2 [nh][ns] of [nh][hp][ns]) applies to every row of its column; any other shape is returned as it is (the
// f16-pool stage's condition is already element by element; compare_tensor refuses a shape that
// does not match, naming both).
Tensor broadcast_condition(const Tensor& cond, const std::vector<int64_t>& field_shape);

// The PLE carry of one (sequence, layer) (STATE-MODEL section 7).
struct PleCarry {
  Tensor history;  // [ngram_size-1] f32 token ids (integers), oldest first
  Tensor conv;     // [(k_size-1)*dilation][C] f32, row 0 oldest
};

struct LayerState {
  Tensor h;                                // GDN [nv, kd, vd], Mamba-2 [nh, hp, ns]; f16 when h_is_f16
  Tensor conv;                             // [conv_dim, d_conv] f32, column 0 oldest
  std::optional<Tensor> h_checkpoint;      // as h, with the dtype h had when it was taken
  std::optional<Tensor> conv_checkpoint;   // as conv
  std::vector<Tensor> h_intermediates;     // valid ones only: t = 0..K-2 of the last verify
  std::vector<Tensor> conv_intermediates;  // valid ones only: t = 0..K-2 of the last verify
  bool h_is_f16 = false;
  HCondition condition;                    // optional (see HCondition)
  // The implementation keeps d_conv-1 conv columns (causal_conv1d's convention, a plug-in's
  // SSMP_CONV_WINDOW_D_CONV_MINUS_1): column 0 of every conv field, which no later step reads, is
  // not its state and is not compared (compare_state drops it on both sides).
  bool conv_oldest_column_absent = false;
  // A layer hosting a PLE carry: the carry, absent until its first row runs (created EOS-filled and
  // zero, then advanced); the checkpoint's copy (absent when no checkpoint was taken or the carry
  // was absent when it was); the last verify's per-row snapshots, indexed by KEPT rows: snapshot t
  // is the carry after t rows, snapshot 0 the carry before the verify (t = 0..K-1).
  std::optional<PleCarry> ple, ple_checkpoint;
  std::vector<PleCarry> ple_snapshots;
};

struct SequenceState {
  int slot = -1;
  int last_verify_k = 0;  // K of the sequence's most recent verify, 0 when none
  std::vector<LayerState> layers;
  std::optional<Tensor> h_prefill_stage;  // f16-pool only: [max nv*kd*vd over layers] f32
  std::optional<Tensor> h_prefill_stage_condition;  // optional: the stage's condition, element by element
  // The implementation keeps no prefill staging blob (a plug-in's SSMP_NO_PREFILL_STAGE: FP16 state
  // is widened in registers): h_prefill_stage is not compared (compare_state skips it).
  bool prefill_stage_absent = false;
};

// Shapes of the fields of one layer.
inline std::vector<int64_t> h_shape(const LayerSpec& s) { return s.h_shape(); }
inline std::vector<int64_t> conv_shape(const LayerSpec& s) { return {s.conv_dim(), s.d_conv}; }
inline std::vector<int64_t> ple_history_shape(const LayerSpec& s) { return {s.ple.history_len()}; }
inline std::vector<int64_t> ple_conv_shape(const LayerSpec& s) { return {s.ple.conv_rows(), s.ple.channels}; }
// A fresh carry: the history EOS-filled, the conv state zero.
PleCarry fresh_ple_carry(const LayerSpec& s);
int64_t stage_elems(const ModelSpec& m);  // FP32 elements of the shared staging blob
// The tensor `s` holds under a state field's name (LayerSpec::state_fields: "h", "conv_checkpoint",
// "h_intermediate", "ple_history_snapshot", ...) and, for an indexed field, index t; nullptr when it
// holds none (an absent checkpoint or carry, t past the intermediates kept, a name it has no field of).
const Tensor* state_field(const LayerState& s, const std::string& name, int t);

}  // namespace ssm
