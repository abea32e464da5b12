// `ssmcheck gate`: the merge gate. Replays the golden traces and checks the faulty ones on every
// available backend, runs seeded campaigns of --cases cases each, prints a one-screen summary and
// writes JUnit XML and JSON.
#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <tuple>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "cli/fuzz_jobs.h"
#include "cli/output_path.h"
#include "cli/shard_option.h"
#include "cli/crash_verdict.h"
#include "cli/default_paths.h"
#include "cli/html_option.h"
#include "cli/tolerance_options.h"
#include "cli/backend_registry.h"
#include "formats/verdict_text.h"
#include "fixtures/hf_config.h"
#include "replay/gate.h"
#include "report/sections.h"

namespace ssm::cli {

namespace {

struct GateFlags {
  int cases = 1000;
  std::string shard;
  std::string junit, json, traces = default_traces_dir(), backend = "all";
  std::vector<std::string> h_modes;  // --h-mode (empty: all)
  std::string preset, config;        // --preset / --config (empty: every model)
  uint64_t seed = 1;
  bool verbose = false;
  bool no_coverage = false;
  int jobs = 1;  // processes per campaign (cli/fuzz_jobs.h)
  ToleranceOptions tol;
  HtmlOption html;
};

void write_file(const std::string& path, const std::string& text, const char* flag) {
  write_text_atomically(path, text, flag);
}

int run_gate(const GateFlags& f) {
  // Output files are checked before any work (an unwritable path fails at once); "-" puts the
  // verdict alone on stdout and everything else on stderr.
  prepare_output_file(f.junit, "--junit");
  prepare_output_file(f.json, "--json");
  f.html.prepare();
  reserve_stdout_for(f.json);
  reserve_stdout_for(f.junit);
  reserve_stdout_for(f.html.path);
  replay::GateOptions o;
  o.traces_dir = f.traces;
  o.cases = f.cases;
  std::tie(o.shard, o.shards) = parse_shard(f.shard);
  o.seed = f.seed;
  o.tolerances = f.tol.resolve();
  o.require_coverage = !f.no_coverage;
  for (const std::string& m : f.h_modes) o.h_modes.push_back(parse_h_mode(m));
  if (!f.preset.empty()) {
    o.model = make_preset(f.preset);
    o.preset = o.model->name;
  }
  if (!f.config.empty()) {
    o.model = model_from_hf_config(f.config);  // a bad config fails here, naming file and field
    o.config_path = f.config;
  }
  o.backends = select_backends(f.backend, &o.skipped);
  if (f.jobs > 1) {
    const int jobs = f.jobs;
    const ToleranceOptions tol = f.tol;
    o.run_campaign = [jobs, tol](const fuzz::CampaignOptions& co, const fuzz::BackendEntry& be) {
      return run_campaign_in_processes(co, jobs, fuzz_command_line(co, be, tol), be);
    };
  }
  if (f.verbose) {
    o.progress = [](const std::string& line) { fmt::print(stderr, "ssmcheck gate: {}\n", line); };
  } else if (isatty(2)) {  // on a terminal: one status line, rewritten in place, cleared at the end
    o.progress = [](const std::string& line) {
      fmt::print(stderr, "\r\033[Kssmcheck gate: {}", line.substr(0, 110));
      std::fflush(stderr);
    };
  }
  fmt::print("ssmcheck gate: traces {}, backends:", f.traces);
  for (const auto& b : o.backends) fmt::print(" {}", b.name);
  for (const auto& s : o.skipped) fmt::print(" ({} skipped: {})", s.first, s.second);
  fmt::print(", seed {}, {} cases per campaign{}\n", f.seed, f.cases,
             jobs_banner(f.jobs));
  // Output files are written before any work with a verdict that says the gate has not finished
  // (not on stdout: one verdict there); a crash in the middle of a check leaves a failing verdict
  // naming it.
  {
    replay::GateResult unfinished;
    unfinished.seed = f.seed;
    unfinished.cases_per_campaign = f.cases;
    replay::GateCase c;
    c.suite = "gate";
    c.name = "unfinished";
    c.status = replay::GateCase::Status::fail;
    c.message = "the gate started but has not finished (killed, or still running)";
    unfinished.cases.push_back(c);
    if (!f.junit.empty() && f.junit != "-") write_file(f.junit, unfinished.junit(), "--junit");
    if (!f.json.empty() && f.json != "-") write_file(f.json, files::json_text(unfinished.json()) + "\n", "--json");
  }
  CrashVerdict crash(f.junit, f.json);
  const replay::GateResult r =
      replay::run_gate(o, [&](const replay::GateResult& so_far, const std::string& suite, const std::string& name) {
        if (f.junit.empty() && f.json.empty()) return;
        replay::GateResult v = so_far;
        replay::GateCase c;
        c.suite = suite;
        c.name = name;
        c.status = replay::GateCase::Status::fail;
        c.message = "crashed: the process died on a fatal signal while running this check (see its stderr)";
        v.cases.push_back(c);
        crash.update(v.junit(), files::json_text(v.json()) + "\n");
      });
  if (!f.verbose && isatty(2)) fmt::print(stderr, "\r\033[K");
  fmt::print("{}", r.summary());
  if (!f.junit.empty()) write_file(f.junit, r.junit(), "--junit");
  if (!f.json.empty()) write_file(f.json, files::json_text(r.json()) + "\n", "--json");
  if (!f.junit.empty() && f.junit != "-") fmt::print("wrote JUnit XML to {}\n", f.junit);
  if (!f.json.empty() && f.json != "-") fmt::print("wrote JSON to {}\n", f.json);
  if (f.html.any()) {
    report::Page page;
    page.title = fmt::format("ssmcheck gate: {}", r.pass() ? "PASS" : "FAIL");
    page.subtitle = fmt::format("traces {}, backend {}, seed {}, {} cases per campaign{}", f.traces, f.backend, f.seed,
                                f.cases, f.shard.empty() ? "" : ", shard " + f.shard);
    page.add(report::checks_section(r, "Checks"));
    page.add(report::text_section("Summary", r.summary()));
    f.html.write(page);
  }
  if (r.pass() && r.nothing_checked()) {
    fmt::print(stderr, "ssmcheck gate: nothing was checked: every check was skipped (see the reasons above)\n");
    return kExitNothingRan;
  }
  return r.pass() ? kExitOk : kExitDiffer;
}

}  // namespace

void add_gate_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("gate", "CI gate: golden and faulty traces on every backend, seeded campaigns");
  auto f = std::make_shared<GateFlags>();
  cmd->add_option("--cases", f->cases,
                  "cases per campaign; the gate is bounded by cases, never by time, so its verdict does not "
                  "depend on the machine")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  cmd->add_option("--junit", f->junit, "write JUnit XML ('-': stdout)");
  cmd->add_option("--json", f->json, "write the verdict as JSON ('-': stdout)");
  cmd->add_option("--traces", f->traces, "golden traces (faulty ones in DIR/faulty)")->capture_default_str();
  cmd->add_option("--backend", f->backend, "all (every available built-in) or " + backend_choices())->capture_default_str();
  cmd->add_option("--seed", f->seed, "campaign seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--h-mode", f->h_modes,
                  "check only these h modes (f32, f16, f16-pool; comma-separated or repeated): traces of other modes "
                  "are skipped and counted, campaigns draw only these")
      ->delimiter(',');
  auto* preset = cmd->add_option("--preset", f->preset,
                                 "check only this model: traces of other models are skipped and counted, campaigns "
                                 "run it alone (no coverage check)");
  cmd->add_option("--config", f->config, "check only the model of this Hugging Face config.json (as --preset)")
      ->excludes(preset);
  cmd->add_option("--shard", f->shard, std::string(shard_help()) + "; shard 0 also replays the traces");
  add_device_option(cmd);
  cmd->add_option("--jobs", f->jobs,
                  "run each campaign in N processes on this machine; the verdict is the one-process gate's")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("-v,--verbose", f->verbose, "one line per check on stderr");
  cmd->add_flag("--no-coverage", f->no_coverage,
                "skip the campaigns' coverage check (for quick looks with too few cases to reach every "
                "threshold, clamp and axis)");
  f->tol.add_to(cmd);
  f->html.add_to(cmd, "one row per check with its status, time and report");
  cmd->callback([=] { *rc = run_gate(*f); });
}

}  // namespace ssm::cli
