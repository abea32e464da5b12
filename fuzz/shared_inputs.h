// The inputs both sides of the lockstep ask for, generated once. The model's Runner and the system
// under test's ask for the same keys in every op (a key is a function of the script: core/runner.h
// InputKey), so the second request of a key gets a copy of what the first generated: the same
// values, without hashing them again (generating was about a tenth of a campaign on the small
// presets). Holds at most one op's inputs: a key is dropped once both sides have it, and the rest
// when the lockstep forgets them after the op. Safe to call from both sides at once.
#pragma once
#include <map>
#include <mutex>
#include <tuple>

#include "core/runner.h"

namespace ssm::fuzz {

class SharedInputs {
 public:
  explicit SharedInputs(InputSource source) : source_(std::move(source)) {}
  SharedInputs(const SharedInputs&) = delete;
  SharedInputs& operator=(const SharedInputs&) = delete;

  // An InputSource for either Runner; it reads this object, which must outlive it.
  InputSource source();
  // Drops what one side asked for and the other did not (an op one side refused).
  void forget();

 private:
  StepInputs get(const InputKey& key, int rows);
  using Key = std::tuple<int, int, int, int, int>;  // op_index, step, seq, batch_row, rows
  InputSource source_;
  std::mutex m_;
  std::map<Key, StepInputs> kept_;  // generated for one side, not yet asked for by the other
};

}  // namespace ssm::fuzz
