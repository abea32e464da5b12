// Runs ops (core/op.h) on a Backend: maps the script's logical sequences to pool slots and
// asks an input source for each op's per-token inputs.
#pragma once
#include <functional>
#include <map>
#include <vector>

#include "core/backend.h"

namespace ssm {

// inputs(op_index, logical sequence or kPadRow, batch row, rows) -> inputs of `rows` tokens.
using InputSource = std::function<StepInputs(int op_index, int seq, int batch_row, int rows)>;

struct OpResult {
  std::vector<int> seqs;             // logical sequences (kPadRow for padding), as in the op
  std::vector<StepOutputs> outputs;  // one per entry of seqs (prefill/decode/verify only)
};

class Runner {
 public:
  Runner(Backend& backend, InputSource inputs) : backend_(backend), inputs_(std::move(inputs)) {}

  // Runs one op. Throws StateError (unknown sequence: bad_slot) before any change.
  OpResult run(const Op& op, int op_index);
  int slot_of(int seq) const;          // throws StateError bad_slot for an unknown sequence
  std::vector<int> live_seqs() const;  // ascending
  Backend& backend() { return backend_; }

 private:
  Backend& backend_;
  InputSource inputs_;
  std::map<int, int> slots_;  // logical sequence -> slot
};

}  // namespace ssm
