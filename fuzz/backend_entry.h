// What the harness needs to know to judge one implementation: how to make it, what it runs as in
// a campaign, what it is judged against and how strictly. cli/backend_registry.cpp holds the one
// list of them (built-ins and plug-ins); campaigns, check, replay and gate take entries from it.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "fuzz/lockstep.h"

namespace ssm::fuzz {

struct BackendEntry {
  std::string name;         // "reference", "cuda", "plugin:NAME": suites, reports, --backend
  std::string flag;         // what --backend takes to name it again (rerun lines): the name, or plugin:PATH,...
  std::string summary;      // one line for `ssmcheck backends`
  BackendFactory make;      // the implementation itself (run, dump, record, replay)
  BackendFactory under_test;  // what a campaign runs against the model (the reference: its alternate path)
  std::string model_name = "reference";  // the implementation it is judged against
  BackendFactory model;     // makes that implementation
  cmp::Strictness strictness = cmp::Strictness::classes;  // bitwise: every tensor exact
  bool pause_async = true;  // gate campaigns hold its async copies until their reader waits
  // The numerics it computes (core/layer_spec.h; a plug-in's SSMP_GATES_TORCH, SSMP_F16_STORE_INF,
  // SSMP_F16_ROWS_CARRIED): the model it is checked on uses them unless --gates etc. say otherwise.
  Numerics numerics;
  // The layer kinds it runs (campaigns draw models of these only): ssmcheck's reference and CUDA
  // implementation run every kind; a plug-in GDN, and Mamba-2 too when it declares SSMP_MAMBA2.
  std::vector<LayerKind> kinds = {LayerKind::gdn};
  // It runs layers hosting a PLE carry (STATE-MODEL section 7): ssmcheck's reference and CUDA
  // implementation do, a plug-in when it declares SSMP_PLE (a Python class: ple = True).
  bool ple = false;
  // "" when it runs every layer of the model; else why not ("layer 1 is mamba2(...); plugin:x.so runs
  // gdn layers only"): replay and the gate skip such a trace on it, with this reason.
  std::string cannot_run(const ModelSpec& spec) const {
    for (size_t l = 0; l < spec.layers.size(); ++l)
      if (std::find(kinds.begin(), kinds.end(), spec.layers[l].kind) == kinds.end()) {
        std::string runs;
        for (LayerKind k : kinds) runs += std::string(runs.empty() ? "" : ", ") + to_string(k);
        return "layer " + std::to_string(l) + " is " + spec.layers[l].name() + "; " + name + " runs " + runs +
               " layers only";
      }
    if (!ple && spec.hosts_ple())
      for (size_t l = 0; l < spec.layers.size(); ++l)
        if (spec.layers[l].ple.hosted())
          return "layer " + std::to_string(l) + " hosts a PLE carry; " + name + " does not run PLE carries";
    return "";
  }
};

}  // namespace ssm::fuzz
