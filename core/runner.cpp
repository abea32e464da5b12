// Op dispatch onto a Backend (see runner.h).
#include "core/runner.h"

#include "core/errors.h"

namespace ssm {

int Runner::slot_of(int seq) const {
  auto it = slots_.find(seq);
  if (it == slots_.end())
    throw StateError(ErrorKind::bad_slot, "script", -1, -1,
                     "sequence @" + std::to_string(seq) + " is not allocated");
  return it->second;
}

std::vector<int> Runner::live_seqs() const {
  std::vector<int> v;
  for (const auto& kv : slots_) v.push_back(kv.first);
  return v;
}

void Runner::adopt(int seq, int slot) {
  slots_[seq] = slot;
  steps_[seq] = 0;
}

InputKey Runner::key_of(int op_index, int seq, int batch_row) const {
  InputKey k;
  k.op_index = op_index;
  k.seq = seq;
  k.batch_row = batch_row;
  auto it = steps_.find(seq);
  k.step = seq == kPadRow ? op_index : it == steps_.end() ? 0 : it->second;
  return k;
}

OpResult Runner::run(const Op& op, int op_index) {
  OpResult r;
  r.seqs = op.seqs;
  const int seq = op.seqs.at(0);
  switch (op.kind) {
    case OpKind::alloc: {
      if (slots_.count(seq))
        throw StateError(ErrorKind::bad_slot, "alloc", slots_.at(seq), -1,
                         "sequence @" + std::to_string(seq) + " is already allocated");
      slots_[seq] = backend_.alloc(op.alloc_min_capacity());
      if (slots_[seq] < 0) slots_.erase(seq);
      else steps_[seq] = 0;  // a sequence id reused after release starts its inputs afresh
      return r;
    }
    case OpKind::release: {
      backend_.release(slot_of(seq));
      slots_.erase(seq);
      steps_.erase(seq);
      return r;
    }
    case OpKind::prefill: {
      const int slot = slot_of(seq);
      r.outputs.push_back(backend_.prefill(slot, inputs_(key_of(op_index, seq, 0), op.prefill_tokens())));
      ++steps_[seq];
      return r;
    }
    case OpKind::decode:
    case OpKind::verify: {
      std::vector<int> slots;
      std::vector<StepInputs> in;
      for (size_t i = 0; i < op.seqs.size(); ++i) {
        slots.push_back(op.seqs[i] == kPadRow ? kPadRow : slot_of(op.seqs[i]));
        in.push_back(inputs_(key_of(op_index, op.seqs[i], int(i)), op.rows()));
      }
      r.outputs =
          op.kind == OpKind::decode ? backend_.decode(slots, in) : backend_.verify(slots, op.verify_rows(), op.arm, in);
      for (int s : op.seqs)
        if (s != kPadRow) ++steps_[s];
      return r;
    }
    case OpKind::checkpoint: backend_.checkpoint(slot_of(seq), false); return r;
    case OpKind::checkpoint_async: backend_.checkpoint(slot_of(seq), true); return r;
    case OpKind::commit: backend_.commit(slot_of(seq), op.commit_accepted(), op.commit_verify_rows()); return r;
    case OpKind::rollback: backend_.rollback(slot_of(seq), op.rollback_n(), false); return r;
    case OpKind::rollback_and_checkpoint_async: backend_.rollback(slot_of(seq), op.rollback_n(), true); return r;
    case OpKind::to_f16: backend_.to_f16(slot_of(seq)); return r;
    case OpKind::snapshot_save: backend_.snapshot_save(slot_of(seq), op.snapshot_index()); return r;
    case OpKind::snapshot_restore: backend_.snapshot_restore(slot_of(seq), op.snapshot_index()); return r;
  }
  return r;
}

}  // namespace ssm
