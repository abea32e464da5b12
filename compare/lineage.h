// FP16 lineage of every field of a sequence: whether its value descends from a value that was
// rounded to FP16 (a to_f16 conversion, an FP16 kernel store, an f16-pool narrow). Only such
// values are judged under the FP16 classes; FP32 state that never met FP16 storage keeps the
// FP32 classes whatever the pool's mode (docs/tolerances.md, "Lineage"). Tracked over the ops
// both sides accepted, by fuzz/lockstep.cpp and replay/replay.cpp.
#pragma once
#include <map>
#include <vector>

#include "core/model.h"
#include "core/op.h"

namespace ssm::cmp {

struct FieldLineage {
  bool h = false;              // live h
  bool h_checkpoint = false;   // as it was when the checkpoint was taken
  bool intermediates = false;  // the last verify's h intermediates
  bool stage = false;          // f16-pool staging blob: the h the last prefill widened
  bool has_checkpoint = false;
};

class LineageTracker {
 public:
  explicit LineageTracker(HMode mode, int snapshots = 0) : mode_(mode), snaps_(size_t(snapshots), false) {}

  // Lineage of the outputs of `op` for sequence `seq`, BEFORE the op is applied: a prefill's
  // outputs read FP32 h (widened exactly from whatever it held); a decode or verify in an f16
  // mode reads rounded state.
  bool output_lineage(const Op& op, int seq) const;
  // Applies an op that both sides accepted.
  void apply(const Op& op);
  // Lineage of a live sequence (a fresh one when unknown).
  FieldLineage of(int seq) const;

 private:
  HMode mode_;
  std::map<int, FieldLineage> seqs_;
  std::vector<bool> snaps_;  // lineage of the h each snapshot slot holds
};

}  // namespace ssm::cmp
