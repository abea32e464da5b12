// The reference's work within an op is independent per layer (each layer has its own inputs,
// state and outputs) and, within a layer's step, per value head, so big models run on several
// threads (OpenMP; OMP_NUM_THREADS caps them): layers in parallel when there are at least as many
// as threads, else the heads of each layer. Results do not depend on the thread count: no value
// is shared between the parallel parts, and the branch counts each part's thread gathered
// (reference/branches.h, per thread) are handed back to the calling thread, so campaigns see the
// same coverage. Small work stays on one thread (below kParallelElems of h the threads cost more
// than they save).
#pragma once
#include <omp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "core/layer_spec.h"
#include "reference/branches.h"

namespace ssm::ref {

constexpr int64_t kParallelElems = int64_t(1) << 18;  // h elements the parallel parts cover together

// f(i) for i in 0..n-1, on several threads when `parallel` (and not already inside a parallel
// region), with the branch counts of every part gathered onto the calling thread.
template <class F>
void parallel_parts(int n, bool parallel, F&& f) {
  if (!parallel || n < 2 || omp_in_parallel() || omp_get_max_threads() < 2) {
    for (int i = 0; i < n; ++i) f(size_t(i));
    return;
  }
  const std::array<int64_t, kBranches> before = take_branch_counts();
  std::vector<std::array<int64_t, kBranches>> counts(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));  // none may leave the region
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) {
    try {
      f(size_t(i));
    } catch (...) {
      errors[size_t(i)] = std::current_exception();
    }
    counts[size_t(i)] = take_branch_counts();  // this part's, from whichever thread ran it
  }
  add_branch_counts(before);
  for (const auto& c : counts) add_branch_counts(c);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);  // the first part's that threw, as on one thread
}

// h elements of every layer together.
inline int64_t h_elems(const std::vector<LayerSpec>& layers) {
  int64_t n = 0;
  for (const LayerSpec& s : layers) n += s.h_elems();
  return n;
}

// f(l) for every layer: in parallel when the layers are big and at least as many as the threads
// (otherwise each layer's step parallelises over its heads: heads_in_parallel).
template <class F>
void for_each_layer(const std::vector<LayerSpec>& layers, F&& f) {
  parallel_parts(int(layers.size()), h_elems(layers) >= kParallelElems && int(layers.size()) >= omp_get_max_threads(),
                 std::forward<F>(f));
}

// Whether one layer's step runs its value heads in parallel.
inline bool heads_in_parallel(const LayerSpec& s) { return s.h_elems() >= kParallelElems / 4; }

}  // namespace ssm::ref
