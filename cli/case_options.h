// Flags shared by every subcommand that runs ops: which model, pool, generator and backend.
// Same names everywhere: --preset --layers --h-mode --slots --capacity --conv-capacity
// --snapshots --seed --decay --value-scale --extreme-gates --gates --f16-store --f16-rows --backend.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/backend.h"
#include "fixtures/case_config.h"

namespace ssm::cli {

// --gates, --f16-store, --f16-rows (core/layer_spec.h, Numerics): each flag given overrides what
// the backend declares (a plug-in's SSMP_GATES_TORCH etc.; built-ins compute the contract's).
struct NumericsFlags {
  std::string gates, f16_store, f16_rows;  // "" when not given
  void add_to(CLI::App* cmd);
  Numerics resolve(const Numerics& declared) const;  // throws std::invalid_argument naming the flag
};

// --layers N against the whole model (`whole`, read with every layer; `model` names it: "preset
// tiny", "config.json PATH"): 0 (all) or 1..its layer count, else std::invalid_argument naming
// --layers, N and the count. Every command taking --layers checks it so (fuzz: with --preset or --config).
void check_layers_flag(int layers, const ModelSpec& whole, const std::string& model);

struct CaseOptions {
  CaseConfig config;
  std::string h_mode = "f32";
  std::string capacity = "4";  // one number for all slots, or a comma list per slot
  std::string backend = "reference";
  NumericsFlags numerics;

  void add_to(CLI::App* cmd, bool with_backend = true);
  CaseConfig resolve() const;  // parses h mode and capacities; throws std::invalid_argument
  ModelSpec spec() const { return resolve().spec(); }
  PoolConfig pool() const { return resolve().pool(); }
  GenConfig gen() const { return config.gen; }
  std::string name() const { return resolve().flags(); }
};

}  // namespace ssm::cli
