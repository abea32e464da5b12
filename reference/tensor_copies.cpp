// Copies of a slot's tensors made together (see tensor_copies.h).
#include "reference/tensor_copies.h"

#include "core/host_copies.h"

namespace ssm::ref {

void TensorCopies::add(Tensor& to, const Tensor& from) {
  add_task(from.bytes(), [&to, &from] { to = from; });
}

void TensorCopies::add(StateCondition& to, const StateCondition& from) {
  add(to.rho, from.rho);
  add(to.shape, from.shape);
}

void TensorCopies::add_task(size_t bytes, std::function<void()> task) {
  tasks_.push_back(std::move(task));
  bytes_ += bytes;
}

void TensorCopies::run() {
  std::vector<std::function<void()>> tasks = std::move(tasks_);
  const size_t bytes = bytes_;
  tasks_.clear();
  bytes_ = 0;
  run_host_copies(int(tasks.size()), bytes, [&](int i) { tasks[size_t(i)](); });
}

}  // namespace ssm::ref
