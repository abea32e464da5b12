// Inputs generated once for both sides (see shared_inputs.h).
#include "fuzz/shared_inputs.h"

namespace ssm::fuzz {

InputSource SharedInputs::source() {
  return [this](const InputKey& key, int rows) { return get(key, rows); };
}

StepInputs SharedInputs::get(const InputKey& key, int rows) {
  const Key k{key.op_index, key.step, key.seq, key.batch_row, rows};
  std::lock_guard<std::mutex> lock(m_);  // held while generating: the other side waits, then copies
  const auto it = kept_.find(k);
  if (it == kept_.end()) return kept_.emplace(k, source_(key, rows)).first->second;
  StepInputs in = std::move(it->second);  // the second side: the last reader
  kept_.erase(it);
  return in;
}

void SharedInputs::forget() {
  std::lock_guard<std::mutex> lock(m_);
  kept_.clear();
}

}  // namespace ssm::fuzz
