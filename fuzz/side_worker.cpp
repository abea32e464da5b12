// A thread running one job at a time (see side_worker.h).
#include "fuzz/side_worker.h"

#include <stdexcept>
#include <utility>

namespace ssm::fuzz {

SideWorker::SideWorker() : thread_([this] { loop(); }) {}

SideWorker::~SideWorker() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SideWorker::start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (busy_) throw std::logic_error("SideWorker::start: the previous job was not waited for");
    job_ = std::move(job);
    busy_ = true;
    error_ = nullptr;
  }
  cv_.notify_all();
}

void SideWorker::wait() {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [this] { return !busy_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void SideWorker::loop() {
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (busy_ && job_); });
    if (stop_) return;
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace ssm::fuzz
