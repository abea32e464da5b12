// Flags shared by every subcommand that runs ops: which model, pool, generator and backend.
// Same names everywhere: --preset --layers --h-mode --slots --capacity --conv-capacity
// --snapshots --seed --decay --value-scale --extreme-gates --gates --f16-store --backend.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/backend.h"
#include "fixtures/case_config.h"

namespace ssm::cli {

// --gates' help, and its value: the flag when given, else what `backend` declares (a plug-in's
// SSMP_GATES_TORCH), else clamped. Throws std::invalid_argument for a bad value.
std::string gates_help();
GateMath resolve_gates(const std::string& flag, const std::string& backend);
// The same for --f16-store (a plug-in's SSMP_F16_STORE_INF).
std::string f16_store_help();
F16Store resolve_f16_store(const std::string& flag, const std::string& backend);

struct CaseOptions {
  CaseConfig config;
  std::string h_mode = "f32";
  std::string capacity = "4";  // one number for all slots, or a comma list per slot
  std::string backend = "reference";
  std::string gates;  // "clamped", "torch", or "" (the backend's declared gates, else clamped)
  std::string f16_store;  // "saturate", "inf", or "" (the backend's declared store, else saturate)

  void add_to(CLI::App* cmd, bool with_backend = true);
  CaseConfig resolve() const;  // parses h mode and capacities; throws std::invalid_argument
  ModelSpec spec() const { return resolve().spec(); }
  PoolConfig pool() const { return resolve().pool(); }
  GenConfig gen() const { return config.gen; }
  std::string name() const { return resolve().flags(); }
};

}  // namespace ssm::cli
