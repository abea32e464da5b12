// Copies of a slot's tensors made together (checkpoint, rollback, verify's intermediates, a fresh
// slot's zeroed fields): on several threads when together they move enough bytes
// (core/host_copies.h). A real shape's layer holds megabytes per field, and its copies, one after
// the other on one thread, were a third of the reference's time in a campaign (docs/fuzzing.md,
// "Speed"). Each copy is `to = from`, as one by one: the same values, shapes and dtypes.
#pragma once
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "reference/gdn_math.h"

namespace ssm::ref {

class TensorCopies {
 public:
  // Queues to = from. No destination may be queued twice or be a source of the same run.
  void add(Tensor& to, const Tensor& from);
  void add(StateCondition& to, const StateCondition& from);
  // Queues a task that fills or assigns one field in place (a fresh slot's zeros, a PLE carry),
  // moving about `bytes`.
  void add_task(size_t bytes, std::function<void()> task);
  // Runs everything queued, then empties the queue.
  void run();

 private:
  std::vector<std::function<void()>> tasks_;
  size_t bytes_ = 0;
};

}  // namespace ssm::ref
