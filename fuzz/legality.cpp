// The independent legality model (see legality.h). Each rule restates STATE-MODEL sections
// 4-6; the order of the rules of one op is the order in which the contract reports them
// (docs/fuzzing.md lists it), so that a refusal's kind is part of what is checked.
#include "fuzz/legality.h"

#include <set>

namespace ssm::fuzz {

namespace {
Verdict refuse(ErrorKind kind, std::string rule) { return Verdict{false, kind, std::move(rule)}; }
const Verdict kLegal{};
}  // namespace

LegalityModel::LegalityModel(const ModelSpec&, const PoolConfig& pool)
    : pool_(pool), snaps_(size_t(std::max(pool.snapshot_slots, 0))) {}

int LegalityModel::capacity(int slot) const {
  // the dummy slot (padding rows) holds as many h intermediates as the largest slot
  if (slot == pool_.max_slots) {
    int most = pool_.h_capacity.empty() ? pool_.conv_capacity : 0;
    for (int c : pool_.h_capacity) most = std::max(most, c);
    return most;
  }
  return pool_.h_capacity.empty() ? pool_.conv_capacity : pool_.h_capacity[size_t(slot)];
}

int LegalityModel::pick_slot(int min_capacity) const {
  // best fit: the free slot with the smallest capacity that suffices, lowest index on ties
  std::set<int> used;
  for (const auto& kv : seqs_) used.insert(kv.second.slot);
  int best = -1;
  for (int s = 0; s < pool_.max_slots; ++s) {
    if (used.count(s) || capacity(s) < min_capacity) continue;
    if (best < 0 || capacity(s) < capacity(best)) best = s;
  }
  return best;
}

const LegalityModel::Seq* LegalityModel::find(int seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

Verdict LegalityModel::judge(const Op& op) const {
  const int seq = op.seqs.empty() ? kPadRow : op.seqs[0];
  if (op.kind == OpKind::alloc) {
    if (find(seq)) return refuse(ErrorKind::bad_slot, "alloc: the sequence is already allocated");
    if (pick_slot(op.alloc_min_capacity()) < 0)
      return refuse(ErrorKind::pool_exhausted, "alloc: no free slot with that capacity");
    return kLegal;
  }
  if (op.is_batch()) {
    for (int s : op.seqs)
      if (s != kPadRow && !find(s)) return refuse(ErrorKind::bad_slot, "batch: a sequence is not allocated");
    if (op.seqs.empty()) return refuse(ErrorKind::bad_argument, "batch: no rows");
    if (op.rows() < 1) return refuse(ErrorKind::bad_argument, "verify: K < 1");
    std::set<int> seen;
    for (int s : op.seqs) {
      if (s != kPadRow && !seen.insert(s).second) return refuse(ErrorKind::bad_slot, "batch: a sequence twice");
      if (op.kind == OpKind::verify) {
        // K rows write K-1 h and conv intermediates into the row's slot (the dummy for padding)
        const int cap = capacity(s == kPadRow ? pool_.max_slots : find(s)->slot);
        if (op.verify_rows() - 1 > cap || op.verify_rows() - 1 > pool_.conv_capacity)
          return refuse(ErrorKind::capacity, "verify: K-1 intermediates beyond the slot's capacity");
      }
    }
    return kLegal;
  }
  const Seq* q = find(seq);
  if (!q) return refuse(ErrorKind::bad_slot, std::string(op_name(op.kind)) + ": the sequence is not allocated");
  switch (op.kind) {
    case OpKind::release:
    case OpKind::checkpoint:
    case OpKind::checkpoint_async:
      return kLegal;
    case OpKind::prefill: return op.prefill_tokens() < 1 ? refuse(ErrorKind::bad_argument, "prefill: T < 1") : kLegal;
    case OpKind::commit: {
      const int n = op.commit_accepted(), k = op.commit_verify_rows();
      if (n < 0) return refuse(ErrorKind::bad_argument, "commit: n < 0");
      if (n == 0) return refuse(ErrorKind::commit_zero, "commit: n == 0");
      if (n > k) return refuse(ErrorKind::commit_n_gt_k, "commit: n > k");
      if (q->verify_k == 0) return refuse(ErrorKind::commit_k_mismatch, "commit: no verify since alloc");
      if (k != q->verify_k) return refuse(ErrorKind::commit_k_mismatch, "commit: k is not the last verify's K");
      if (n < k && q->inter_f16 != q->h_f16)
        return refuse(ErrorKind::dtype_mismatch, "commit: intermediates and live h differ in dtype");
      return kLegal;
    }
    case OpKind::rollback:
    case OpKind::rollback_and_checkpoint_async: {
      const int n = op.rollback_n();
      if (n < 0) return refuse(ErrorKind::bad_argument, "rollback: n < 0");
      if (n == 0)
        return q->checkpoint && q->checkpoint_f16 != q->h_f16
                   ? refuse(ErrorKind::dtype_mismatch, "rollback 0: checkpoint and live h differ in dtype")
                   : kLegal;
      if (n - 1 >= capacity(q->slot) || n - 1 >= pool_.conv_capacity)
        return refuse(ErrorKind::rollback_range, "rollback: intermediate n-1 beyond the slot's capacity");
      if (q->verify_k == 0) return refuse(ErrorKind::rollback_range, "rollback: no verify since alloc");
      if (n - 1 > q->verify_k - 2)
        return refuse(ErrorKind::rollback_range, "rollback: the last verify did not write intermediate n-1");
      if (q->inter_f16 != q->h_f16)
        return refuse(ErrorKind::dtype_mismatch, "rollback: intermediates and live h differ in dtype");
      return kLegal;
    }
    case OpKind::to_f16:
      if (pool_.h_mode != HMode::f16) return refuse(ErrorKind::wrong_mode, "to_f16: not an f16-mode pool");
      if (q->h_f16) return refuse(ErrorKind::to_f16_twice, "to_f16: h is already FP16");
      return kLegal;
    case OpKind::snapshot_save:
    case OpKind::snapshot_restore: {
      const int i = op.snapshot_index();
      if (i < 0 || i >= int(snaps_.size())) return refuse(ErrorKind::bad_argument, "snapshot: index out of range");
      if (op.kind == OpKind::snapshot_restore) {
        const Snap& sn = snaps_[size_t(i)];
        if (!sn.saved) return refuse(ErrorKind::snapshot_empty, "snapshot_restore: never saved");
        if (sn.h_f16 != q->h_f16)
          return refuse(ErrorKind::dtype_mismatch, "snapshot_restore: snapshot and live h differ in dtype");
      }
      return kLegal;
    }
    default:
      return kLegal;
  }
}

void LegalityModel::apply(const Op& op) {
  const int seq = op.seqs.empty() ? kPadRow : op.seqs[0];
  const bool f16_mode = pool_.h_mode == HMode::f16;
  switch (op.kind) {
    case OpKind::alloc: {
      Seq q;
      q.slot = pick_slot(op.alloc_min_capacity());
      q.h_f16 = q.checkpoint_f16 = q.inter_f16 = pool_.h_mode == HMode::f16_pool;
      seqs_[seq] = q;
      return;
    }
    case OpKind::release: seqs_.erase(seq); return;
    case OpKind::prefill:
      if (f16_mode) seqs_.at(seq).h_f16 = false;  // a prefill on FP16 h widens it back
      return;
    case OpKind::decode:
    case OpKind::verify:
      for (int s : op.seqs) {
        if (s == kPadRow) continue;
        Seq& q = seqs_.at(s);
        if (f16_mode) q.h_f16 = true;  // the first decode step converts
        if (op.kind == OpKind::verify) {
          q.verify_k = op.verify_rows();
          q.inter_f16 = q.h_f16;
        }
      }
      return;
    case OpKind::checkpoint:
    case OpKind::checkpoint_async:
    case OpKind::rollback_and_checkpoint_async: {
      Seq& q = seqs_.at(seq);
      q.checkpoint = true;
      q.checkpoint_f16 = q.h_f16;
      return;
    }
    case OpKind::to_f16: seqs_.at(seq).h_f16 = true; return;
    case OpKind::snapshot_save: snaps_[size_t(op.snapshot_index())] = Snap{true, seqs_.at(seq).h_f16}; return;
    case OpKind::commit:
    case OpKind::rollback:
    case OpKind::snapshot_restore:
      return;
  }
}

}  // namespace ssm::fuzz
