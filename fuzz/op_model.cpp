// Campaign bookkeeping model (see op_model.h).
#include "fuzz/op_model.h"

#include <algorithm>

#include "core/errors.h"

namespace ssm::fuzz {

bool OpModel::seqs_ok(const Op& op) const {
  if (op.kind == OpKind::alloc) return !seqs_.count(op.seqs.at(0));
  for (int s : op.seqs)
    if (s != kPadRow && !seqs_.count(s)) return false;
  return true;
}

std::vector<int> OpModel::live() const {
  std::vector<int> v;
  for (const auto& kv : seqs_) v.push_back(kv.first);
  return v;
}

bool OpModel::apply(const Op& op) {
  if (!seqs_ok(op)) return false;
  const int seq = op.seqs.at(0);
  try {
    switch (op.kind) {
      case OpKind::alloc: {
        const int slot = contract_.check_alloc(op.alloc_min_capacity());
        contract_.on_alloc(slot);
        seqs_[seq] = slot;
        next_ = std::max(next_, seq + 1);
        return true;
      }
      case OpKind::release:
        contract_.check_claimed("release", seqs_.at(seq));
        contract_.on_release(seqs_.at(seq));
        seqs_.erase(seq);
        return true;
      case OpKind::prefill:
        contract_.check_claimed("prefill", seqs_.at(seq));
        if (op.prefill_tokens() < 1) return false;
        contract_.on_prefill(seqs_.at(seq));
        return true;
      case OpKind::decode:
      case OpKind::verify: {
        std::vector<int> slots;
        for (int s : op.seqs) slots.push_back(s == kPadRow ? kPadRow : seqs_.at(s));
        contract_.check_batch_slots(op.kind, slots, op.rows());
        for (int s : slots) {
          if (s == kPadRow) continue;
          if (contract_.needs_to_f16(s)) contract_.on_to_f16(s);
          if (op.kind == OpKind::verify) contract_.on_verify(s, op.verify_rows());
        }
        return true;
      }
      case OpKind::checkpoint:
      case OpKind::checkpoint_async:
        contract_.check_claimed("checkpoint", seqs_.at(seq));
        contract_.on_checkpoint(seqs_.at(seq));
        return true;
      case OpKind::commit:
        contract_.check_commit(seqs_.at(seq), op.commit_accepted(), op.commit_verify_rows());
        return true;
      case OpKind::rollback:
      case OpKind::rollback_and_checkpoint_async:
        contract_.check_rollback(op.kind, seqs_.at(seq), op.rollback_n());
        if (op.kind == OpKind::rollback_and_checkpoint_async) contract_.on_checkpoint(seqs_.at(seq));
        return true;
      case OpKind::to_f16:
        contract_.check_to_f16(seqs_.at(seq));
        contract_.on_to_f16(seqs_.at(seq));
        return true;
      case OpKind::snapshot_save:
      case OpKind::snapshot_restore:
        contract_.check_snapshot(op.kind, seqs_.at(seq), op.snapshot_index());
        if (op.kind == OpKind::snapshot_save) contract_.on_snapshot_save(seqs_.at(seq), op.snapshot_index());
        return true;
    }
  } catch (const StateError&) {
    return false;
  }
  return false;
}

}  // namespace ssm::fuzz
