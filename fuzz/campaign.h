// Property-based campaigns: RapidCheck's state machine drives random sequences of ops
// (alloc/release, prefill, decode, checkpoint(_async), verify (both arms), commit, rollback,
// rollback_and_checkpoint_async, to_f16, snapshots, batched ops with padding rows, and illegal
// ops) through the reference (the model) and a system under test in lockstep, comparing every
// live sequence after every op. Failures shrink to a minimal op script that is printed and
// dumped. Used by tests/property_test.cpp and `ssmcheck fuzz`.
#pragma once
#include <stdexcept>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/case_record.h"
#include "fuzz/lockstep.h"

namespace ssm::fuzz {

// SIGINT or SIGTERM reached a campaign run in processes (cli/fuzz_jobs.h): its processes were
// stopped and their directory removed. Nothing goes on after it (the gate lets it through);
// main() answers it with exit 2 and the message.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CampaignOptions {
  uint64_t seed = 1;
  // The campaign is bounded by its case count: the same seed and count give the same cases and
  // the same verdict on any machine. Case i (0-based) is drawn from its own RapidCheck seed
  // (mix(seed, i)), so a prefix of a campaign is a smaller campaign of the same seed.
  int cases = 100;
  int max_ops = 40;              // longest op sequence of a case
  // A deterministic partition for spreading one campaign over machines (a CI matrix, a Slurm
  // array, `ctest -j` on a multi-GPU host): shard I of N runs the cases i < `cases` with
  // i % N == I, so the N shards together run exactly the unsharded campaign's cases.
  int shard = 0, shards = 1;
  // Exploratory only (`fuzz --duration`, never the gate): > 0 runs cases until this many
  // seconds have passed, checked between cases, so the cases that run depend on the machine's
  // speed; `cases` is then an upper bound. The summary names the cases that ran.
  double duration_s = 0;
  bool shrink = true;
  std::optional<std::string> preset;  // fixed preset, else drawn from the small odd presets
  std::optional<std::string> config_path;  // fixed model from a Hugging Face config.json (wins over preset)
  std::optional<HMode> h_mode;        // fixed h mode, else drawn
  Numerics numerics;  // every case's numerics (the backend's declaration, or --gates etc.)
  // What the system under test runs (BackendEntry::caps): drawn presets, h modes, slots and ops stay
  // inside it, and the coverage check requires only what it runs.
  Capabilities caps = Capabilities::everything();
  int layers = 0;                     // with a fixed big preset: keep the first N layers
  std::string out_dir;                // where failing cases are written ("" = nowhere)
  std::string backend_label = "reference";  // --backend value that reruns the case
  bool rerun_in_python = false;             // BackendEntry::python_class: the rerun line goes through the Python bridge
  cmp::Tolerances tolerances = cmp::Tolerances::defaults();
  cmp::Strictness strictness = cmp::Strictness::classes;
  Invariant sut_invariant;                           // checked after every op (e.g. guard bands)
  // Hold the SUT's async copies until their reader waits (Backend::pause_async_copies): a reader
  // that skips its wait then reads stale bytes every time. The gate's CUDA campaign runs with it.
  bool pause_async = false;
  // The two sides of each op at once (Lockstep); default: Lockstep::default_concurrent_sides().
  std::optional<bool> concurrent_sides;
  // With drawn configurations (no fixed preset or h mode): a campaign that never reached one of
  // Coverage::required() fails its coverage check (the gate's campaigns do this).
  bool require_coverage = false;
  std::function<void(const std::string&)> progress;  // one-line progress updates
  // Called after each case with what it contributed (`fuzz --case-records`: the processes of
  // `fuzz --jobs` write these, fuzz/campaign_merge.h merges them).
  std::function<void(const CaseRecord&)> on_case;
};

struct CampaignResult {
  int cases = 0;     // cases that ran to completion or failure: case indexes 0..cases-1
  bool stopped_by_duration = false;  // duration_s ran out before `cases` were reached
  int64_t ops = 0;   // ops applied (shrinking included)
  std::vector<int64_t> case_ops;  // ops of each case that ran, in order (case shard + k * shards)
  int shard = 0, shards = 1;      // the partition it ran (CampaignOptions)
  double seconds = 0;
  uint64_t seed = 0;
  bool failed = false;
  int failed_case = -1;  // index of the failing case
  bool gave_up = false;
  std::string message;       // RapidCheck's description or the gave-up reason
  Coverage coverage;
  PhaseTimes times;  // where the lockstep runs' time went (shrinking included)
  std::string model_name, sut_name;  // the two sides, as the backends name themselves
  std::vector<std::string> coverage_missing;  // require_coverage: what the campaign never reached
  // Fields whose errors went one way across the campaign's sequences (fuzz/bias.h): a failure;
  // and fields that lean one way, below what fails: a note
  std::vector<std::string> bias, bias_leaning;
  // The minimal failing case: configuration flags, op script, and what differed.
  CaseConfig config;
  std::string case_flags, script, report, rerun;
  int script_length = 0;
  nlohmann::json divergence;            // the failing op's comparison (cmp::StateReport::json), or {"text": ...}
  std::vector<std::string> simplified;  // what shrinking the configuration changed (fuzz/simplify.h)
  // The minimal case failed again when rerun (fuzz/simplify.h); false: a failure that did not
  // recur in kRecurrenceRuns reruns, whose evidence is the campaign's own run, not a rerun.
  bool recurred = true;
  // Conventions the implementation computes without declaring them: each a single change of the
  // case's numerics under which the minimal case passes (fuzz/convention_hints.h)
  std::vector<std::string> convention_hints;
  std::vector<std::string> files;  // dumps and the case text file
  std::string summary() const;
  // "case 0..9 of seed 1", or with shards "case 1, 4, .. 10 of seed 1, shard 1/3"
  std::string case_range() const;
  // Sequences the campaign created (allocs both sides applied): the unit of the false-alarm count
  // (docs/tolerances.md).
  int64_t sequences() const;
  // A failure as fields (null when it passed): {"case", "case_flags", "config", "script",
  // "script_ops", "rerun", "simplified", "recurred", "divergence", "convention_hints"} (the JSON
  // verdicts' "evidence").
  nlohmann::json evidence() const;
};

// `s` as one shell word: single-quoted, a ' inside written '\'' (the rerun lines).
std::string shell_quoted(const std::string& s);
// The shell command that reruns `args` (ssmcheck's arguments: a check or replay line) with the
// Python class this process runs: the class and its sys.path come from the environment
// python/ssmcheck/bridge.py's run() set (SSMCHECK_PYTHON_CLASS, SSMCHECK_PYTHON_PATH,
// SSMCHECK_PYTHON_HOST's interpreter); without them, a line naming what to fill in.
std::string python_rerun(const std::string& args);

// A case's configuration as fields: preset or config, layers, h mode, pool, generator and numerics.
nlohmann::json config_json(const CaseConfig& c);

// A digest of what decides a campaign's cases and how they are judged: the seed, the longest
// script, the fixed model (preset, config, layers, h mode), the numerics, the layer kinds, the
// PLE carry, the tolerances, the strictness, held async copies and the backend label (part of the
// rerun line). Not the partition (shard, cases), shrinking, the coverage requirement (checked on
// the merged result), outputs or callbacks. Every case record carries its campaign's
// (CaseRecord::campaign), and the merge refuses a record of another campaign: a process whose
// command line lost or changed such a flag.
uint64_t campaign_fingerprint(const CampaignOptions& o);

CampaignResult run_campaign(const CampaignOptions& options, const BackendFactory& model,
                            const BackendFactory& sut);

// The end of a campaign that ran: with require_coverage and drawn configurations, what the
// passing campaign never reached; and, for any passing campaign, the fields biased one way
// (fuzz/bias.h). run_campaign and the merge of `fuzz --jobs` both end so.
void check_campaign_coverage(const CampaignOptions& options, CampaignResult& result);

// Replays one op script in lockstep; stops at the first divergence.
struct ReplayResult {
  bool pass = true;
  int ops = 0;
  int64_t accepted = 0;  // ops both sides accepted (0: every op was refused, nothing was compared)
  std::string report;
  std::vector<std::string> op_labels;      // the ops that ran, printable ("decode @0,1"); then "(end of the case)"
  std::vector<cmp::TensorMargin> margins;  // every tensor compared, op by op (where.op_index)
  int failed_op = -1;                      // index into op_labels of the divergence; -1 when it passed
  nlohmann::json divergence;               // the failing op's comparison (cmp::StateReport::json), or {"text": ...}
};
ReplayResult check_script(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& model,
                          const BackendFactory& sut, const cmp::Tolerances& tol, cmp::Strictness strictness,
                          const std::string& dump_prefix = "", const Invariant& invariant = nullptr,
                          bool pause_async = false);

}  // namespace ssm::fuzz
