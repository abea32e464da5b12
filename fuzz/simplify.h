// Shrinking the configuration of a failing case, after RapidCheck shrank its script: a greedy
// pass that tries the simpler value of every knob (no extreme gates, the default decay, value
// scale 1, fewer layers, slots, capacities and snapshots, the exact verify arm, no padding rows,
// batches of fewer entries, ops left out) and keeps each one under which the case still fails in
// the same place (the same kind of failure on the same field), so a reported case carries no flag
// the bug does not need. Used by run_campaign (fuzz/campaign.h) on every failure it shrinks.
#pragma once
#include <string>
#include <vector>

#include "fuzz/campaign.h"

namespace ssm::fuzz {

struct Simplified {
  CaseConfig config;
  std::vector<Op> script;
  ReplayResult result;             // the simplified case's run (it fails)
  std::vector<std::string> steps;  // what was simplified, in order ("--extreme-gates off", ...)
  // The case failed again when rerun (up to kRecurrenceRuns times): false means a failure that
  // does not reproduce (a race, or state leaking between cases), reported as such, and nothing is
  // simplified against it.
  bool recurred = true;
  int reruns = 0;  // the runs it took to fail again (or kRecurrenceRuns)
};
constexpr int kRecurrenceRuns = 3;

// `config` and `script` must fail (a campaign's shrunk case); each candidate runs once through
// check_script with the same judges. max_runs bounds the candidates tried.
Simplified simplify_case(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& model,
                         const BackendFactory& sut, const cmp::Tolerances& tol, cmp::Strictness strictness,
                         const Invariant& invariant, bool pause_async, int max_runs = 80);

}  // namespace ssm::fuzz
