// Flags shared by every subcommand that runs ops: which model, pool, generator and backend.
// Same names everywhere: --preset --layers --h-mode --slots --capacity --conv-capacity
// --snapshots --seed --decay --value-scale --backend.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/backend.h"
#include "fixtures/generators.h"

namespace ssm::cli {

struct CaseOptions {
  std::string preset = "tiny";
  int layers = 0;
  std::string h_mode = "f32";
  int slots = 4;
  std::string capacity = "4";  // one number for all slots, or a comma list per slot
  int conv_capacity = 4;
  int snapshots = 2;
  uint64_t seed = 1;
  double decay = 0.5;
  double value_scale = 1.0;
  std::string backend = "reference";

  void add_to(CLI::App* cmd, bool with_backend = true);
  ModelSpec spec() const;
  PoolConfig pool() const;
  GenConfig gen() const;
  std::string name() const;  // one string that reproduces the case
};

// "reference" or "cuda" (when built with CUDA). Throws std::invalid_argument otherwise.
std::unique_ptr<Backend> make_backend(const std::string& name);

}  // namespace ssm::cli
