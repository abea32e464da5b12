// FP16 lineage bookkeeping (see lineage.h). Mirrors the data movement of STATE-MODEL section 4.
#include "compare/lineage.h"

namespace ssm::cmp {

FieldLineage LineageTracker::of(int seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? FieldLineage{} : it->second;
}

bool LineageTracker::output_lineage(const Op& op, int seq) const {
  if (op.kind == OpKind::prefill) return of(seq).h;
  return mode_ != HMode::f32;  // decode and verify run on FP16 state in both f16 modes
}

void LineageTracker::apply(const Op& op) {
  const bool f16 = mode_ != HMode::f32;
  const int seq = op.seqs.at(0);
  switch (op.kind) {
    case OpKind::alloc: seqs_[seq] = FieldLineage{}; return;  // zero is exact in FP16
    case OpKind::release: seqs_.erase(seq); return;
    case OpKind::prefill: {
      FieldLineage& l = seqs_[seq];
      if (mode_ == HMode::f16_pool) {
        l.stage = l.h;  // widened exactly into the stage, FP32 prefill there,
        l.h = true;     // then narrowed: rounded
      }
      return;  // f32 and f16: FP32 prefill on (exactly widened) h keeps its lineage
    }
    case OpKind::decode:
    case OpKind::verify:
      for (int s : op.seqs) {
        if (s == kPadRow) continue;
        FieldLineage& l = seqs_[s];
        l.h = l.h || f16;
        if (op.kind == OpKind::verify) l.intermediates = l.h;
      }
      return;
    case OpKind::checkpoint:
    case OpKind::checkpoint_async: {
      FieldLineage& l = seqs_[seq];
      l.h_checkpoint = l.h;
      l.has_checkpoint = true;
      return;
    }
    case OpKind::commit:
      if (op.commit_accepted() < op.commit_verify_rows()) seqs_[seq].h = seqs_[seq].intermediates;
      return;
    case OpKind::rollback:
    case OpKind::rollback_and_checkpoint_async: {
      FieldLineage& l = seqs_[seq];
      if (op.rollback_n() >= 1) l.h = l.intermediates;
      else if (l.has_checkpoint) l.h = l.h_checkpoint;
      if (op.kind == OpKind::rollback_and_checkpoint_async) {
        l.h_checkpoint = l.h;
        l.has_checkpoint = true;
      }
      return;
    }
    case OpKind::to_f16: seqs_[seq].h = true; return;
    case OpKind::snapshot_save: {
      const size_t i = size_t(op.snapshot_index());
      if (i >= snaps_.size()) snaps_.resize(i + 1, false);
      snaps_[i] = seqs_[seq].h;
      return;
    }
    case OpKind::snapshot_restore: {
      const size_t i = size_t(op.snapshot_index());
      seqs_[seq].h = i < snaps_.size() && snaps_[i];
      return;
    }
  }
}

}  // namespace ssm::cmp
