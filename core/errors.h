// Typed errors of the op contract (STATE-MODEL section 4). Both backends raise the same kind,
// before changing any state, with a message naming the op, sequence slot, layer and limit.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ssm {

enum class ErrorKind {
  bad_argument,        // malformed op argument (T < 1, K < 1, negative n, unknown snapshot)
  bad_input,           // inputs of wrong size or with NaN/Inf
  bad_slot,            // slot not claimed, out of range, or repeated in one batch
  pool_exhausted,      // no free slot (with the requested capacity)
  commit_zero,         // commit with n == 0
  commit_n_gt_k,       // commit with n > k
  commit_k_mismatch,   // commit k is not the last verify's K (or no verify yet)
  capacity,            // verify K needs K-1 intermediates beyond the slot's capacity
  rollback_range,      // rollback n >= 1 without intermediate n-1 from the last verify
  to_f16_twice,        // to_f16 on h that is already FP16
  wrong_mode,          // op not allowed in this h mode (to_f16 outside f16 mode)
  dtype_mismatch,      // restoring FP32 bytes into FP16 h or the reverse
  snapshot_empty,      // snapshot_restore from a snapshot never saved
};
const char* to_string(ErrorKind k);
// The one list of error kinds (core/contract.cpp), for readers and writers of their names.
const std::vector<ErrorKind>& all_error_kinds();
std::optional<ErrorKind> parse_error_kind(const std::string& name);  // nullopt: unknown
std::string known_error_kinds();  // "bad_argument, bad_input, ..." for messages

class StateError : public std::runtime_error {
 public:
  StateError(ErrorKind kind, const std::string& op, int slot, int layer, const std::string& what)
      : std::runtime_error(format(kind, op, slot, layer, what)), kind_(kind), op_(op), slot_(slot),
        layer_(layer) {}
  ErrorKind kind() const { return kind_; }
  const std::string& op() const { return op_; }
  int slot() const { return slot_; }    // -1 when not about one slot
  int layer() const { return layer_; }  // -1 when about every layer

 private:
  static std::string format(ErrorKind kind, const std::string& op, int slot, int layer,
                            const std::string& what) {
    std::string s = std::string(to_string(kind)) + ": " + op;
    if (slot >= 0) s += " on slot " + std::to_string(slot);
    if (layer >= 0) s += " layer " + std::to_string(layer);
    return s + ": " + what;
  }
  ErrorKind kind_;
  std::string op_;
  int slot_, layer_;
};

}  // namespace ssm
