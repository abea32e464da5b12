// What the harness needs to know to judge one implementation: how to make it, what it runs as in
// a campaign, what it is judged against and how strictly. cli/backend_registry.cpp holds the one
// list of them (built-ins and plug-ins); campaigns, check, replay and gate take entries from it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "core/capabilities.h"
#include "fuzz/lockstep.h"

namespace ssm::fuzz {

struct BackendEntry {
  std::string name;         // "reference", "cuda", "plugin:NAME": suites, reports, --backend
  std::string flag;         // what --backend takes to name it again (rerun lines): the name, or plugin:PATH,...
  std::string summary;      // one line for `ssmcheck backends`
  BackendFactory make;      // the implementation itself (run, dump, record, replay)
  BackendFactory under_test;  // what a campaign runs against the model (the reference: its alternate path)
  // under_test is not the implementation but its alternate path (fuzz/alt_reference.h): the reference
  bool alternate_path = false;
  // A Python class (python:NAME): a failing case's rerun line goes through the Python bridge
  bool python_class = false;
  std::string model_name = "reference";  // the implementation it is judged against
  BackendFactory model;     // makes that implementation
  cmp::Strictness strictness = cmp::Strictness::classes;  // bitwise: every tensor exact
  // The numerics it computes (core/layer_spec.h; a plug-in's SSMP_GATES_TORCH, SSMP_F16_STORE_INF,
  // SSMP_F16_ROWS_CARRIED): the model it is checked on uses them unless --gates etc. say otherwise.
  Numerics numerics;
  // What it runs (core/capabilities.h): ssmcheck's reference and CUDA implementation everything (the
  // CUDA one with its async path), a plug-in or Python class what it declares. Campaigns draw inside
  // it; replay and the gate skip the rest with the reason cannot_run gives.
  Capabilities caps;
  // "" when it runs every layer of the model; else why not ("layer 1 is mamba2(...); plugin:x.so runs
  // gdn layers only"): replay and the gate skip such a trace on it, with this reason.
  std::string cannot_run(const ModelSpec& spec) const { return caps.cannot_run(spec, name); }
  // A campaign's two sides, as the gate names them: "reference vs alternate path", "reference vs cuda".
  std::string campaign_sides() const { return model_name + " vs " + (alternate_path ? "alternate path" : name); }
  // It offers a perturbed schedule (Backend::perturb_schedule): the gate runs part of its campaign on
  // perturbed_entry(*this) too.
  bool perturbable = false;
  // It is perturbed_entry(base): its implementations run with their schedule perturbed.
  bool perturbed = false;
  // The side under test as a summary line names it: the made implementation's own name ("cuda",
  // "reference-alt", "python:NAME"), with the perturbed: prefix when its schedule is perturbed.
  std::string under_test_label() const;
};

// `perturbed:NAME` (docs/cuda.md, "Perturbed schedules"): `base` with its schedule perturbed from
// its creation on, with kPerturbSeed. Made implementations that offer no such mode are an error
// naming the backend.
constexpr const char* kPerturbedPrefix = "perturbed:";
constexpr uint64_t kPerturbSeed = 0x5eed5c4edull;
BackendEntry perturbed_entry(const BackendEntry& base);
// The refusal of `entry` (a perturbed: name) because `impl` offers no perturbed schedule, in one
// wording wherever it is found out (the registry before making it, the entry when making it).
std::string no_perturbed_schedule(const std::string& entry, const std::string& impl);

}  // namespace ssm::fuzz
