// Runs ops (core/op.h) on a Backend: maps the script's logical sequences to pool slots and
// asks an input source for each op's per-token inputs.
#pragma once
#include <functional>
#include <map>
#include <vector>

#include "core/backend.h"

namespace ssm {

// Which inputs an op's row needs.
struct InputKey {
  int op_index = 0;   // position of the op in its script (what a recorded trace is indexed by)
  // Stable under shrinking: for a sequence, the number of input-consuming ops (prefill, decode,
  // verify) it completed before this one; for a padding row, the op index. Removing an
  // unrelated op from a script leaves it unchanged.
  int step = 0;
  int seq = 0;        // logical sequence, or kPadRow
  int batch_row = 0;  // row of the batch (0 for prefill)
};
// inputs(key, rows) -> inputs of `rows` tokens.
using InputSource = std::function<StepInputs(const InputKey& key, int rows)>;

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
  // Maps `seq` to `slot`, claimed on the backend by other means (Backend::import_state: a replay
  // that starts from a recorded state); its inputs start afresh.
  void adopt(int seq, int slot);
  Backend& backend() { return backend_; }

 private:
  Backend& backend_;
  InputSource inputs_;
  std::map<int, int> slots_;  // logical sequence -> slot
  std::map<int, int> steps_;  // logical sequence -> input-consuming ops completed (the input key)
  InputKey key_of(int op_index, int seq, int batch_row) const;
};

}  // namespace ssm
