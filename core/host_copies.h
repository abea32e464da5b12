// Host-side work over the fields of a large state (the copies of exports and read backs, the
// reference's field digests) on several threads.
#pragma once
#include <cstddef>
#include <functional>

namespace ssm {

// Work moving at least this many bytes runs on several threads (OpenMP); below it a thread team
// costs more than it saves (the odd presets' states are kilobytes, a real shape's tens of
// megabytes).
constexpr size_t kParallelHostBytes = size_t(4) << 20;

// Runs task(0) .. task(n - 1), in no fixed order, on several threads when together they move
// `bytes` >= kParallelHostBytes, else on this one. An exception a task throws (an allocation that
// fails) may not leave an OpenMP region: the first is kept and rethrown once every task ran.
void run_host_copies(int n, size_t bytes, const std::function<void(int)>& task);

}  // namespace ssm
