// Op contract checks and effects (see contract.h).
#include "core/contract.h"

#include "core/mutant.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace ssm {

namespace {
std::string str(int v) { return std::to_string(v); }
}  // namespace

Contract::Contract(const ModelSpec& spec, const PoolConfig& pool)
    : spec_(spec), pool_(pool), slots_(size_t(pool.max_slots) + 1), snaps_(size_t(pool.snapshot_slots)) {
  pool_.validate();
  SlotMeta& dummy = slots_.back();
  dummy.claimed = true;
  dummy.h_is_f16 = pool.h_mode != HMode::f32;
}

int Contract::check_alloc(int min_capacity) const {
  int best = -1;
  for (int s = 0; s < pool_.max_slots; ++s) {
    if (slots_[size_t(s)].claimed || pool_.capacity(s) < min_capacity) continue;
    if (best < 0 || pool_.capacity(s) < pool_.capacity(best)) best = s;
  }
  if (best < 0) {
    int free = 0;
    for (int s = 0; s < pool_.max_slots; ++s) free += !slots_[size_t(s)].claimed;
    throw StateError(ErrorKind::pool_exhausted, "alloc", -1, -1,
                     "no free slot with h intermediate capacity >= " + str(min_capacity) + " (" +
                         str(free) + " of " + str(pool_.max_slots) + " slots free)");
  }
  return best;
}

void Contract::check_claimed(const char* op, int slot) const {
  if (slot < 0 || slot >= pool_.max_slots)
    throw StateError(ErrorKind::bad_slot, op, slot, -1,
                     "slot out of range 0.." + str(pool_.max_slots - 1));
  if (!slots_[size_t(slot)].claimed)
    throw StateError(ErrorKind::bad_slot, op, slot, -1, "slot is not claimed");
}

void Contract::check_prefill(int slot, const StepInputs& in) const {
  check_claimed("prefill", slot);
  if (in.rows < 1) throw StateError(ErrorKind::bad_argument, "prefill", slot, -1, "T must be >= 1");
  try {
    in.validate(spec_, in.rows);
  } catch (const std::invalid_argument& e) {
    throw StateError(ErrorKind::bad_input, "prefill", slot, -1, e.what());
  }
}

void Contract::check_batch_slots(OpKind op, const std::vector<int>& slots, int rows) const {
  const char* name = op_name(op);
  if (slots.empty()) throw StateError(ErrorKind::bad_argument, name, -1, -1, "empty batch");
  if (rows < 1) throw StateError(ErrorKind::bad_argument, name, -1, -1, "K must be >= 1");
  std::set<int> seen;
  for (const int s : slots) {
    const int cap_slot = s == kPadRow ? dummy_slot() : s;
    if (s != kPadRow) {
      check_claimed(name, s);
      if (!seen.insert(s).second)
        throw StateError(ErrorKind::bad_slot, name, s, -1, "slot appears twice in one batch");
    }
    if (op == OpKind::verify) {
      // mutant (bug class 3): one intermediate beyond the capacity accepted
      const int need = SSM_MUTANT("contract_capacity_off_by_one") ? rows - 2 : rows - 1;
      if (need > pool_.capacity(cap_slot) || need > pool_.conv_capacity)
        throw StateError(ErrorKind::capacity, name, cap_slot, -1,
                         "K=" + str(rows) + " needs " + str(need) + " intermediates; slot holds " +
                             str(pool_.capacity(cap_slot)) + " h and " + str(pool_.conv_capacity) +
                             " conv intermediates");
    }
  }
}

void Contract::check_batch(OpKind op, const std::vector<int>& slots, int rows,
                           const std::vector<StepInputs>& in) const {
  const char* name = op_name(op);
  if (in.size() != slots.size())
    throw StateError(ErrorKind::bad_input, name, -1, -1,
                     str(int(in.size())) + " input sets for " + str(int(slots.size())) + " rows");
  check_batch_slots(op, slots, rows);
  for (size_t i = 0; i < slots.size(); ++i) {
    try {
      in[i].validate(spec_, rows);
    } catch (const std::invalid_argument& e) {
      throw StateError(ErrorKind::bad_input, name, slots[i] == kPadRow ? dummy_slot() : slots[i], -1,
                       "batch row " + str(int(i)) + ": " + e.what());
    }
  }
}

void Contract::check_commit(int slot, int n, int k) const {
  check_claimed("commit", slot);
  const SlotMeta& m = slots_[size_t(slot)];
  const std::string args = "commit(n=" + str(n) + ", k=" + str(k) + ")";
  if (n < 0) throw StateError(ErrorKind::bad_argument, "commit", slot, -1, args + ": n < 0");
  if (n == 0) throw StateError(ErrorKind::commit_zero, "commit", slot, -1, args + ": n == 0 (use rollback 0)");
  if (n > k) throw StateError(ErrorKind::commit_n_gt_k, "commit", slot, -1, args + ": n > k");
  if (m.last_verify_k == 0)
    throw StateError(ErrorKind::commit_k_mismatch, "commit", slot, -1, args + ": no verify since alloc");
  if (k != m.last_verify_k && !SSM_MUTANT("contract_commit_k_unchecked"))  // mutant: bug class 13
    throw StateError(ErrorKind::commit_k_mismatch, "commit", slot, -1,
                     args + ": the last verify had K=" + str(m.last_verify_k));
  if (n < k && m.intermediate_dtype != m.h_dtype())
    throw StateError(ErrorKind::dtype_mismatch, "commit", slot, -1,
                     args + ": intermediates hold " + to_string(m.intermediate_dtype) + " h, live h is " +
                         to_string(m.h_dtype()));
}

void Contract::check_rollback(OpKind op, int slot, int n) const {
  const char* name = op_name(op);
  check_claimed(name, slot);
  const SlotMeta& m = slots_[size_t(slot)];
  if (n < 0) throw StateError(ErrorKind::bad_argument, name, slot, -1, "rollback " + str(n) + ": n < 0");
  if (n == 0) {
    if (m.has_h_checkpoint && m.h_checkpoint_dtype != m.h_dtype())
      throw StateError(ErrorKind::dtype_mismatch, name, slot, -1,
                       "rollback 0: the checkpoint holds " + std::string(to_string(m.h_checkpoint_dtype)) +
                           " h, live h is " + to_string(m.h_dtype()) + " (checkpoint taken before to_f16?)");
    return;
  }
  const int t = n - 1;
  if (t >= pool_.capacity(slot) || t >= pool_.conv_capacity)
    throw StateError(ErrorKind::rollback_range, name, slot, -1,
                     "rollback " + str(n) + ": intermediate " + str(t) + " is beyond the slot's capacity " +
                         str(pool_.capacity(slot)));
  if (m.last_verify_k == 0)
    throw StateError(ErrorKind::rollback_range, name, slot, -1,
                     "rollback " + str(n) + ": no verify since alloc wrote intermediates");
  if (t > m.last_verify_k - 2)
    throw StateError(ErrorKind::rollback_range, name, slot, -1,
                     "rollback " + str(n) + ": the last verify (K=" + str(m.last_verify_k) +
                         ") wrote intermediates 0.." + str(m.last_verify_k - 2) + " only");
  if (m.intermediate_dtype != m.h_dtype())
    throw StateError(ErrorKind::dtype_mismatch, name, slot, -1,
                     "rollback " + str(n) + ": intermediates hold " + to_string(m.intermediate_dtype) +
                         " h, live h is " + to_string(m.h_dtype()));
}

void Contract::check_to_f16(int slot) const {
  check_claimed("to_f16", slot);
  if (pool_.h_mode != HMode::f16)
    throw StateError(ErrorKind::wrong_mode, "to_f16", slot, -1,
                     std::string("to_f16 is an f16-mode op; the pool is ") + to_string(pool_.h_mode));
  if (slots_[size_t(slot)].h_is_f16)
    throw StateError(ErrorKind::to_f16_twice, "to_f16", slot, -1, "h is already FP16");
}

void Contract::check_snapshot(OpKind op, int slot, int snap) const {
  const char* name = op_name(op);
  check_claimed(name, slot);
  if (snap < 0 || snap >= pool_.snapshot_slots)
    throw StateError(ErrorKind::bad_argument, name, slot, -1,
                     "snapshot " + str(snap) + " out of range (pool has " + str(pool_.snapshot_slots) + ")");
  if (op == OpKind::snapshot_restore) {
    const SnapshotMeta& sm = snaps_[size_t(snap)];
    if (!sm.saved)
      throw StateError(ErrorKind::snapshot_empty, name, slot, -1, "snapshot " + str(snap) + " was never saved");
    if (sm.h_dtype != slots_[size_t(slot)].h_dtype())
      throw StateError(ErrorKind::dtype_mismatch, name, slot, -1,
                       "snapshot " + str(snap) + " holds " + to_string(sm.h_dtype) + " h, live h is " +
                           to_string(slots_[size_t(slot)].h_dtype()));
  }
}

bool Contract::needs_to_f16(int slot) const {
  return pool_.h_mode == HMode::f16 && !slots_.at(size_t(slot)).h_is_f16;
}

bool Contract::prefill_widens(int slot) const {
  return pool_.h_mode == HMode::f16 && slots_.at(size_t(slot)).h_is_f16;
}

void Contract::on_alloc(int slot) {
  SlotMeta m;
  m.claimed = true;
  m.h_is_f16 = pool_.h_mode == HMode::f16_pool;
  m.h_checkpoint_dtype = m.intermediate_dtype = m.h_dtype();
  slots_[size_t(slot)] = m;
}

void Contract::on_release(int slot) { slots_[size_t(slot)].claimed = false; }

void Contract::on_prefill(int slot) {
  if (pool_.h_mode == HMode::f16) slots_[size_t(slot)].h_is_f16 = false;
}

void Contract::on_to_f16(int slot) { slots_[size_t(slot)].h_is_f16 = true; }

void Contract::on_verify(int slot, int k) {
  SlotMeta& m = slots_[size_t(slot)];
  m.last_verify_k = k;
  m.intermediate_dtype = m.h_dtype();
}

void Contract::on_checkpoint(int slot) {
  SlotMeta& m = slots_[size_t(slot)];
  m.has_h_checkpoint = m.has_conv_checkpoint = true;
  m.h_checkpoint_dtype = m.h_dtype();
}

void Contract::on_snapshot_save(int slot, int snap) {
  snaps_[size_t(snap)].saved = true;
  snaps_[size_t(snap)].h_dtype = slots_[size_t(slot)].h_dtype();
}

const char* to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::bad_argument: return "bad_argument";
    case ErrorKind::bad_input: return "bad_input";
    case ErrorKind::bad_slot: return "bad_slot";
    case ErrorKind::pool_exhausted: return "pool_exhausted";
    case ErrorKind::commit_zero: return "commit_zero";
    case ErrorKind::commit_n_gt_k: return "commit_n_gt_k";
    case ErrorKind::commit_k_mismatch: return "commit_k_mismatch";
    case ErrorKind::capacity: return "capacity";
    case ErrorKind::rollback_range: return "rollback_range";
    case ErrorKind::to_f16_twice: return "to_f16_twice";
    case ErrorKind::wrong_mode: return "wrong_mode";
    case ErrorKind::dtype_mismatch: return "dtype_mismatch";
    case ErrorKind::snapshot_empty: return "snapshot_empty";
  }
  return "?";
}

const std::vector<ErrorKind>& all_error_kinds() {
  static const std::vector<ErrorKind> v = {
      ErrorKind::bad_argument,      ErrorKind::bad_input,      ErrorKind::bad_slot,       ErrorKind::pool_exhausted,
      ErrorKind::commit_zero,       ErrorKind::commit_n_gt_k,  ErrorKind::commit_k_mismatch, ErrorKind::capacity,
      ErrorKind::rollback_range,    ErrorKind::to_f16_twice,   ErrorKind::wrong_mode,     ErrorKind::dtype_mismatch,
      ErrorKind::snapshot_empty};
  return v;
}

std::optional<ErrorKind> parse_error_kind(const std::string& name) {
  for (ErrorKind k : all_error_kinds())
    if (name == to_string(k)) return k;
  return std::nullopt;
}

std::string known_error_kinds() {
  std::string s;
  for (ErrorKind k : all_error_kinds()) s += (s.empty() ? "" : ", ") + std::string(to_string(k));
  return s;
}

}  // namespace ssm

namespace ssm {

SlotMeta Contract::check_import(int slot, const SequenceState& st) const {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument("import into slot " + std::to_string(slot) + ": " + what);
  };
  if (slot < 0 || slot >= pool_.max_slots) bad("no such slot (0.." + std::to_string(pool_.max_slots - 1) + ")");
  if (slots_[size_t(slot)].claimed) bad("the slot is claimed");
  if (st.layers.size() != spec_.layers.size())
    bad(std::to_string(st.layers.size()) + " layers, the model has " + std::to_string(spec_.layers.size()));
  const int n = std::max(st.last_verify_k - 1, 0);
  if (st.last_verify_k < 0 || n > pool_.capacity(slot) || n > pool_.conv_capacity)
    bad("last_verify_k " + std::to_string(st.last_verify_k) + " beyond the slot's capacity");
  SlotMeta m;
  m.claimed = true;
  m.last_verify_k = st.last_verify_k;
  for (size_t l = 0; l < st.layers.size(); ++l) {
    const LayerState& ls = st.layers[l];
    const LayerSpec& s = spec_.layers[l];
    const std::string at = "layer " + std::to_string(l) + " ";
    auto field = [&](const Tensor& t, const std::vector<int64_t>& shape, const char* name) {
      if (t.shape() != shape) bad(at + name + ": shape does not match " + s.name());
    };
    if (ls.h_is_f16 && pool_.h_mode == HMode::f32) bad(at + "h is FP16 in an f32 pool");
    if (l == 0) m.h_is_f16 = ls.h_is_f16;
    else if (ls.h_is_f16 != m.h_is_f16) bad(at + "h_is_f16 differs from layer 0's");
    if (ls.h.dtype() != m.h_dtype()) bad(at + "h: dtype does not match h_is_f16");
    field(ls.h, h_shape(s), "h");
    field(ls.conv, conv_shape(s), "conv");
    if (ls.conv.dtype() != DType::f32) bad(at + "conv is not f32");
    if (l == 0) {
      m.has_h_checkpoint = ls.h_checkpoint.has_value();
      m.has_conv_checkpoint = ls.conv_checkpoint.has_value();
    } else if (m.has_h_checkpoint != ls.h_checkpoint.has_value() ||
               m.has_conv_checkpoint != ls.conv_checkpoint.has_value()) {
      bad(at + "checkpoint presence differs from layer 0's");
    }
    if (ls.h_checkpoint) {
      field(*ls.h_checkpoint, h_shape(s), "h_checkpoint");
      if (l == 0) m.h_checkpoint_dtype = ls.h_checkpoint->dtype();
      else if (ls.h_checkpoint->dtype() != m.h_checkpoint_dtype) bad(at + "h_checkpoint dtype differs from layer 0's");
    }
    if (ls.conv_checkpoint) field(*ls.conv_checkpoint, conv_shape(s), "conv_checkpoint");
    if (ls.h_intermediates.size() != size_t(n) || ls.conv_intermediates.size() != size_t(n))
      bad(at + "intermediates: " + std::to_string(ls.h_intermediates.size()) + " h and " +
          std::to_string(ls.conv_intermediates.size()) + " conv, last_verify_k " + std::to_string(st.last_verify_k) +
          " needs " + std::to_string(n));
    for (int t = 0; t < n; ++t) {
      field(ls.h_intermediates[size_t(t)], h_shape(s), "h_intermediates");
      field(ls.conv_intermediates[size_t(t)], conv_shape(s), "conv_intermediates");
      const DType d = ls.h_intermediates[size_t(t)].dtype();
      if (l == 0 && t == 0) m.intermediate_dtype = d;
      else if (d != m.intermediate_dtype) bad(at + "h_intermediates: mixed dtypes");
    }
    if (n == 0) m.intermediate_dtype = m.h_dtype();
    if (!m.has_h_checkpoint) m.h_checkpoint_dtype = m.h_dtype();
  }
  if (st.h_prefill_stage && st.h_prefill_stage->shape() != std::vector<int64_t>{stage_elems(spec_)})
    bad("h_prefill_stage: shape does not match the model's staging blob");
  return m;
}

void Contract::on_import(int slot, const SlotMeta& meta) { slots_.at(size_t(slot)) = meta; }

}  // namespace ssm
