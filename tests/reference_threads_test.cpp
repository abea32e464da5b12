// The reference on several threads (reference/layer_parallel.h: layers, or the heads of a layer,
// in parallel; reference/tensor_copies.h: a real shape's copies, zeroed fields and FP16
// conversions) gives the same bits and the same branch counts as on one thread, in every h mode,
// on both paths (heads in parallel: 2 big layers; layers in parallel: more layers than threads).
#include <gtest/gtest.h>
#include <omp.h>

#include <stdexcept>
#include <string>

#include "core/runner.h"
#include "fixtures/generators.h"
#include "reference/branches.h"
#include "reference/layer_parallel.h"
#include "reference/reference_backend.h"
#include "reference/tensor_copies.h"

namespace ssm {
namespace {

struct Outcome {
  std::vector<SequenceState> states;
  std::vector<std::vector<StepOutputs>> outputs;
  std::array<int64_t, ref::kBranches> branches{};
};

Outcome run(int threads, const ModelSpec& spec, HMode mode, const std::string& ops) {
  omp_set_num_threads(threads);
  GenConfig g;
  g.seed = 5;
  g.value_scale = 3000;  // FP16 stores clamp: branch counts to gather
  g.extreme_gates = true;
  PoolConfig pool;
  pool.h_mode = mode;
  ref::ReferenceBackend b;
  b.create_pool(make_model(spec, g), pool);
  Runner r(b, input_source(spec, g));
  Outcome o;
  (void)ref::take_branch_counts();
  const auto script = parse_script(ops);
  for (size_t i = 0; i < script.size(); ++i) {
    const OpResult res = r.run(script[i], int(i));
    o.outputs.push_back(res.outputs);
    o.states.push_back(b.export_state(r.slot_of(0)));
  }
  o.branches = ref::take_branch_counts();
  return o;
}

void expect_same(const Outcome& a, const Outcome& b) {
  ASSERT_EQ(a.states.size(), b.states.size());
  for (size_t i = 0; i < a.states.size(); ++i)
    for (size_t l = 0; l < a.states[i].layers.size(); ++l) {
      EXPECT_TRUE(a.states[i].layers[l].h.bit_equal(b.states[i].layers[l].h)) << "op " << i << " layer " << l;
      EXPECT_TRUE(a.states[i].layers[l].conv.bit_equal(b.states[i].layers[l].conv)) << "op " << i << " layer " << l;
      ASSERT_EQ(a.states[i].layers[l].h_intermediates.size(), b.states[i].layers[l].h_intermediates.size());
      for (size_t t = 0; t < a.states[i].layers[l].h_intermediates.size(); ++t)
        EXPECT_TRUE(a.states[i].layers[l].h_intermediates[t].bit_equal(b.states[i].layers[l].h_intermediates[t]));
      EXPECT_TRUE(a.states[i].layers[l].condition.h->bit_equal(*b.states[i].layers[l].condition.h));
    }
  for (size_t i = 0; i < a.outputs.size(); ++i)
    for (size_t e = 0; e < a.outputs[i].size(); ++e) EXPECT_EQ(a.outputs[i][e].layers, b.outputs[i][e].layers) << "op " << i;
  EXPECT_EQ(a.branches, b.branches) << "branch counts differ: campaigns would see another coverage";
}

// every copy of the reference: the fresh slot, verify's intermediates, commit and rollback to an
// intermediate and to the checkpoint, the checkpoint, the FP16 conversion of f16 mode's decode
const char* kOps =
    "alloc; prefill 6; verify 4; commit 2 4; decode; checkpoint; decode; rollback 0; decode; verify 3; rollback 1; "
    "decode";

TEST(ReferenceThreads, HeadsInParallelGiveTheSameBitsAndCounts) {
  const ModelSpec spec = make_preset("qwen3-next-80b", 2);  // 2 big layers: each layer's heads in parallel
  for (HMode mode : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    SCOPED_TRACE(to_string(mode));
    const Outcome one = run(1, spec, mode, kOps);
    EXPECT_GT(one.branches[size_t(ref::Branch::softplus_threshold)], 0);
    expect_same(one, run(4, spec, mode, kOps));
  }
}

TEST(ReferenceThreads, LayersInParallelGiveTheSameBitsAndCounts) {
  const ModelSpec spec = make_preset("qwen3-next-80b", 5);  // 5 layers >= 4 threads: layers in parallel
  const Outcome one = run(1, spec, HMode::f16_pool, kOps);
  expect_same(one, run(4, spec, HMode::f16_pool, kOps));
  omp_set_num_threads(omp_get_num_procs());
}

TEST(ReferenceThreads, TensorCopiesMakeEveryCopyAsOneByOne) {
  omp_set_num_threads(4);
  // three sources of other dtypes and shapes than their destinations, over the parallel bound
  std::vector<Tensor> from = {Tensor::zeros(DType::f32, {3, 1 << 18}), Tensor::zeros(DType::f16, {1 << 20}),
                              Tensor::zeros(DType::f32, {5, 7})};
  for (Tensor& t : from)
    for (int64_t i = 0; i < t.size(); ++i) {
      if (t.dtype() == DType::f32) t.f32()[i] = float(i % 1000) * 0.25f - 17.0f;
      else t.f16()[i] = uint16_t(i * 7);
    }
  std::vector<Tensor> to = {Tensor::zeros(DType::f16, {4}), Tensor(), Tensor::zeros(DType::f32, {1 << 21})};
  ref::TensorCopies copies;
  int filled = 0;
  for (size_t i = 0; i < from.size(); ++i) copies.add(to[i], from[i]);
  copies.add_task(0, [&] { ++filled; });
  copies.run();
  for (size_t i = 0; i < from.size(); ++i) {
    EXPECT_EQ(to[i].shape(), from[i].shape()) << "copy " << i;
    EXPECT_TRUE(to[i].bit_equal(from[i])) << "copy " << i;
  }
  EXPECT_EQ(filled, 1);
  copies.run();  // the queue is empty after a run: nothing runs twice
  EXPECT_EQ(filled, 1);
  omp_set_num_threads(omp_get_num_procs());
}

// An exception must not leave an OpenMP region (that terminates the process): parallel_parts
// rethrows the lowest-numbered failing part's exception on the caller, as one thread would.
TEST(ParallelParts, APartsExceptionReachesTheCallerOnAnyThreadCount) {
  for (int threads : {1, 4}) {
    omp_set_num_threads(threads);
    int reached = 0;
    try {
      ref::parallel_parts(12, true, [&](size_t p) {
        if (p == 3 || p == 7) throw std::runtime_error("part " + std::to_string(p));
        if (p == 0) reached = 1;
      });
      ADD_FAILURE() << threads << " threads: no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "part 3") << threads << " threads";
    }
    EXPECT_EQ(reached, 1) << threads << " threads";
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace
}  // namespace ssm
