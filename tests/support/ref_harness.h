// Test support for reference tests: building a backend on a preset, slicing inputs, and
// bitwise state equality with a readable first difference.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/runner.h"
#include "fixtures/generators.h"
#include "reference/reference_backend.h"

namespace ssm::test {

struct RefCase {
  ModelSpec spec;
  PoolConfig pool;
  GenConfig gen;
  std::unique_ptr<ref::ReferenceBackend> backend = std::make_unique<ref::ReferenceBackend>();

  RefCase(const std::string& preset, HMode mode, uint64_t seed, int capacity = 4, int slots = 3) {
    spec = make_preset(preset);
    pool.h_mode = mode;
    pool.max_slots = slots;
    pool.conv_capacity = capacity;
    pool.h_capacity.assign(size_t(slots), capacity);
    gen.seed = seed;
    backend->create_pool(make_model(spec, gen), pool);
  }
  StepInputs inputs(int op, int rows, int seq = 0) const { return make_inputs(spec, gen, op, seq, 0, rows); }
  std::string name() const { return spec.name + " " + pool.name() + " " + gen.name(); }
};

// Rows [begin, begin+count) of an input set.
inline StepInputs slice_rows(const ModelSpec& spec, const StepInputs& in, int begin, int count) {
  return in.slice(spec, begin, count);
}

// First bitwise difference between two tensors, or "" when equal.
inline std::string tensor_diff(const Tensor& a, const Tensor& b, const std::string& what) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return what + ": " + a.shape_string() + " vs " + b.shape_string();
  for (int64_t i = 0; i < a.size(); ++i) {
    const bool same = a.dtype() == DType::f32 ? std::memcmp(a.f32() + i, b.f32() + i, 4) == 0
                                              : a.f16()[i] == b.f16()[i];
    if (!same)
      return what + ": element " + std::to_string(i) + " " + std::to_string(a.get(i)) + " vs " +
             std::to_string(b.get(i));
  }
  return "";
}

// Bitwise equality of live h and conv (and optionally every other field) of two states.
inline std::string state_diff(const SequenceState& a, const SequenceState& b, bool live_only) {
  if (a.layers.size() != b.layers.size()) return "layer count differs";
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const LayerState &x = a.layers[l], &y = b.layers[l];
    const std::string at = "layer " + std::to_string(l) + " ";
    std::string d = tensor_diff(x.h, y.h, at + "h");
    if (d.empty()) d = tensor_diff(x.conv, y.conv, at + "conv");
    if (!d.empty()) return d;
    if (x.h_is_f16 != y.h_is_f16) return at + "h_is_f16 differs";
    if (live_only) continue;
    if (x.h_checkpoint.has_value() != y.h_checkpoint.has_value()) return at + "checkpoint presence differs";
    if (x.h_checkpoint) d = tensor_diff(*x.h_checkpoint, *y.h_checkpoint, at + "h_checkpoint");
    if (d.empty() && x.conv_checkpoint) d = tensor_diff(*x.conv_checkpoint, *y.conv_checkpoint, at + "conv_checkpoint");
    if (!d.empty()) return d;
    if (x.h_intermediates.size() != y.h_intermediates.size()) return at + "intermediate count differs";
    for (size_t t = 0; t < x.h_intermediates.size() && d.empty(); ++t) {
      d = tensor_diff(x.h_intermediates[t], y.h_intermediates[t], at + "h_intermediate " + std::to_string(t));
      if (d.empty())
        d = tensor_diff(x.conv_intermediates[t], y.conv_intermediates[t], at + "conv_intermediate " + std::to_string(t));
    }
    if (!d.empty()) return d;
  }
  if (live_only) return "";
  if (a.h_prefill_stage.has_value() != b.h_prefill_stage.has_value()) return "stage presence differs";
  if (a.h_prefill_stage) return tensor_diff(*a.h_prefill_stage, *b.h_prefill_stage, "h_prefill_stage");
  return "";
}

}  // namespace ssm::test
