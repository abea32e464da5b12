// The lockstep's side thread (fuzz/side_worker.h): every job runs exactly once and is finished
// when wait() returns, back to back or after the worker sat idle, and whether the job outlasts the
// caller's arrival at wait() or not; a job's exception reaches wait(); starting a job before the
// last was waited for is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "fuzz/side_worker.h"

namespace ssm::test {
namespace {

TEST(SideWorker, BackToBackJobsEachRunOnceAndFinishBeforeWaitReturns) {
  fuzz::SideWorker w;
  long sum = 0;  // written by the worker, read here only after wait()
  for (int i = 1; i <= 20000; ++i) {
    w.start([&sum, i] { sum += i; });
    w.wait();
    ASSERT_EQ(sum, long(i) * (i + 1) / 2) << "job " << i;
  }
}

TEST(SideWorker, IdleWorkerAndSlowJobs) {
  fuzz::SideWorker w;
  int runs = 0;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the worker idle
    w.start([&runs] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the caller waits for the job
      ++runs;
    });
    w.wait();
    EXPECT_EQ(runs, i + 1);
  }
}

TEST(SideWorker, AJobsExceptionReachesWaitAndTheWorkerGoesOn) {
  fuzz::SideWorker w;
  w.start([] { throw std::runtime_error("the model side failed"); });
  try {
    w.wait();
    FAIL() << "wait() returned without the job's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the model side failed");
  }
  bool ran = false;
  w.start([&ran] { ran = true; });
  EXPECT_NO_THROW(w.wait());
  EXPECT_TRUE(ran);
}

TEST(SideWorker, StartingBeforeTheLastJobWasWaitedForIsRefused) {
  fuzz::SideWorker w;
  std::atomic<bool> release{false};
  w.start([&release] {
    while (!release.load()) std::this_thread::yield();
  });
  EXPECT_THROW(w.start([] {}), std::logic_error);
  release.store(true);
  w.wait();
}

}  // namespace
}  // namespace ssm::test
