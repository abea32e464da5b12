// A thread that runs one job at a time beside the calling thread: the lockstep runs the model's
// side of an op (and its exports) there while the system under test runs on the calling thread.
// The thread persists for the worker's life, so the OpenMP team the reference starts from it is
// reused op after op. An exception thrown by a job is rethrown by wait().
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace ssm::fuzz {

class SideWorker {
 public:
  SideWorker();
  ~SideWorker();
  SideWorker(const SideWorker&) = delete;
  SideWorker& operator=(const SideWorker&) = delete;

  // Starts `job` on the worker; the previous job must have been waited for.
  void start(std::function<void()> job);
  // Waits for the job started last; rethrows what it threw.
  void wait();

 private:
  void loop();
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the members it uses exist
};

}  // namespace ssm::fuzz
