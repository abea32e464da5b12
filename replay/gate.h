// The CI gate: replays every golden trace (DIR/*.h5) on every available backend, checks that
// every faulty trace (DIR/faulty/*.h5) diverges exactly where its expect_* attributes say, and
// runs seeded campaigns (reference vs its alternate path; each other backend vs the reference)
// of a fixed number of cases, so the verdict never depends on the machine's speed. Produces a one-screen summary, JUnit XML and JSON.
// Counterparts: cli/cmd_gate.cpp, replay/replay.h, fuzz/campaign.h.
#pragma once
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "fuzz/backend_entry.h"
#include "fuzz/campaign.h"

namespace ssm::replay {

struct GateOptions {
  std::string traces_dir;          // golden traces; faulty ones in traces_dir/faulty
  int cases = 1000;                // cases per campaign (deterministic: never a time budget)
  uint64_t seed = 1;               // campaign seed
  int max_ops = 30;                // longest op sequence of a campaign case
  // campaigns fail their coverage check when a threshold, clamp or axis was never reached
  // (fuzz::Coverage::required); off only for quick looks with few cases (gate --no-coverage)
  bool require_coverage = true;
  // Shard I of N (fuzz::CampaignOptions::shard): the campaigns run their cases i % N == I, and
  // shard 0 also replays the traces, so the N shards together run exactly the unsharded gate.
  // Each shard checks the coverage of its own cases: give every shard enough of them.
  int shard = 0, shards = 1;
  // Filters (gate --h-mode, --preset, --config): only these h modes (empty: all), only this model
  // (a trace of another model is skipped; the campaigns run it alone, without the coverage check).
  std::vector<HMode> h_modes;
  std::optional<std::string> preset, config_path;
  std::optional<ModelSpec> model;  // the filter's model (the preset's or the config's), to match traces
  std::vector<fuzz::BackendEntry> backends;                // available ones (cli/backend_registry.h)
  std::vector<std::pair<std::string, std::string>> skipped;  // unavailable backend, why
  cmp::Tolerances tolerances = cmp::Tolerances::defaults();
  std::function<void(const std::string&)> progress;        // one line per finished case
  // Runs one campaign of the gate; null: fuzz::run_campaign in this process. `gate --jobs N` runs
  // it in N processes (cli/fuzz_jobs.h), whose result is the one-process campaign's.
  std::function<fuzz::CampaignResult(const fuzz::CampaignOptions&, const fuzz::BackendEntry&)> run_campaign;
};
struct GateResult;

struct GateCase {
  enum class Status { pass, fail, skipped };
  std::string suite;    // "replay.golden.reference", "replay.faulty.cuda", "campaign.reference", ...
  std::string name;     // trace file name or campaign name
  Status status = Status::pass;
  double seconds = 0;
  std::string message;  // one line
  std::string details;  // the full report on failure
  int shrunk_ops = -1;  // campaigns that failed: length of the minimal failing script
  // A golden trace recorded by this backend with other numerics, judged under the classes instead
  // of bit for bit (replay::ReplayResult::other_numerics): the summary names the command that
  // re-stamps it (`ssmcheck approve`). `path`: the trace file.
  bool other_numerics = false;
  std::string path;
  // What a failure is made of, as fields (null: none): a campaign's failing case (its flags and
  // configuration, the script, the rerun line, the first divergence with its worst elements and
  // the likely causes: fuzz::CampaignResult::evidence), a check's script and divergence.
  nlohmann::json evidence;
};

// The verdict of a run of checks; also what `replay`, `fuzz` and `check` write as JUnit and JSON
// (one case per trace and backend, per campaign, per script), so CI reads every verdict alike.
struct GateResult {
  std::string tool = "ssmcheck gate";  // the JUnit <testsuites> name
  std::vector<GateCase> cases;
  double seconds = 0;
  int cases_per_campaign = 0;
  uint64_t seed = 0;
  bool pass() const;
  // Every check was skipped (or there was none): nothing was checked, which is not a pass (exit 5).
  bool nothing_checked() const;
  int count(GateCase::Status s) const;
  std::string summary() const;  // one screen
  std::string junit() const;    // JUnit XML
  // {"schema": "ssmcheck-verdict", "schema_version": kVerdictSchemaVersion, "tool", "pass", "seconds",
  // "seed", "cases_per_campaign", "counts": {"pass", "fail", "skipped"}, "nothing_checked",
  // "cases": [{"suite", "name", "status", "seconds", "message", "details", "shrunk_ops"?,
  // "other_numerics"?}]}: gate,
  // fuzz, check and replay (which adds "results") write it.
  nlohmann::json json() const;
};
constexpr int kVerdictSchemaVersion = 1;  // bumped when a field changes meaning or goes away

// check_starting (optional): called before each check with the checks done so far, and the suite
// and name of the one about to run (cli/crash_verdict.h keeps a verdict ready in case it crashes).
GateResult run_gate(const GateOptions& options,
                    const std::function<void(const GateResult& so_far, const std::string& suite,
                                             const std::string& name)>& check_starting = nullptr);

}  // namespace ssm::replay
