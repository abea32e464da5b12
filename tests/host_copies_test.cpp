// run_host_copies (core/host_copies.h): every task runs exactly once below and above the
// parallel bound, and an exception thrown by a task comes out of the call (the first one kept)
// after the other tasks ran, instead of ending the process inside the OpenMP region.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/host_copies.h"

namespace ssm {
namespace {

TEST(HostCopies, EveryTaskRunsOnceOnOneThreadOrMany) {
  omp_set_num_threads(4);
  for (size_t bytes : {size_t(0), kParallelHostBytes - 1, kParallelHostBytes, size_t(1) << 30}) {
    std::vector<std::atomic<int>> runs(257);
    run_host_copies(int(runs.size()), bytes, [&](int i) { ++runs[size_t(i)]; });
    for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << "task " << i << ", " << bytes << " bytes";
  }
  run_host_copies(0, kParallelHostBytes, [](int) { FAIL() << "no task to run"; });
}

TEST(HostCopies, AThrowingTaskIsRethrownAfterTheOthersRan) {
  omp_set_num_threads(4);
  for (size_t bytes : {size_t(0), kParallelHostBytes}) {
    std::atomic<int> ran{0};
    try {
      run_host_copies(64, bytes, [&](int i) {
        ++ran;
        if (i == 17) throw std::runtime_error("task 17: out of memory");
      });
      ADD_FAILURE() << "no exception at " << bytes << " bytes";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "task 17: out of memory");
    }
    EXPECT_EQ(ran.load(), 64) << bytes << " bytes";
  }
}

}  // namespace
}  // namespace ssm
