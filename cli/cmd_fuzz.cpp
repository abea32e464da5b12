// `ssmcheck fuzz`: a property-based campaign from the command line (the model is always the
// reference; --backend names the system under test, `reference` meaning its alternate path),
// and `ssmcheck check`: one op script through the same lockstep comparison.
#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <tuple>
#include <optional>

#include "cli/backend_registry.h"
#include "cli/case_options.h"
#include "cli/commands.h"
#include "cli/crash_verdict.h"
#include "cli/device_option.h"
#include "cli/fuzz_jobs.h"
#include "cli/html_option.h"
#include "cli/output_path.h"
#include "cli/shard_option.h"
#include "cli/tolerance_options.h"
#include "compare/likely_cause.h"
#include "formats/verdict_text.h"
#include "fixtures/hf_config.h"
#include "fuzz/convention_hints.h"
#include "fuzz/campaign.h"
#include "replay/gate.h"
#include "report/divergence_grid.h"
#include "report/sections.h"

namespace ssm::cli {

namespace {

// Where the verdict goes: --junit and --json ("-": stdout).
struct VerdictFiles {
  std::string junit, json;
  bool any() const { return !junit.empty() || !json.empty(); }
  void prepare() const {
    prepare_output_file(junit, "--junit");
    prepare_output_file(json, "--json");
    reserve_stdout_for(json);
    reserve_stdout_for(junit);
  }
  void write(const replay::GateResult& v) const {
    if (!junit.empty()) write_text_atomically(junit, v.junit(), "--junit");
    if (!json.empty()) write_text_atomically(json, files::json_text(v.json()) + "\n", "--json");
  }
};

struct FuzzFlags {
  uint64_t seed = 1;
  int cases = 100;
  // (with duration 0 the campaign is bounded by cases alone)
  int max_ops = 40;
  double duration = 0;
  std::string backend = "reference", preset, config, h_mode, shard, out = "ssmcheck-fuzz";
  NumericsFlags numerics;
  VerdictFiles verdict;
  int layers = 0;
  bool no_shrink = false;
  bool pause_async = false;
  bool require_coverage = false;
  int jobs = 1;              // processes on this machine (cli/fuzz_jobs.h)
  std::string case_records;  // hidden: where a process of --jobs writes its records
  ToleranceOptions tol;
  HtmlOption html;
};

// A `fuzz --duration` command line as a campaign of the fixed cases it ran: --duration left out
// and --cases the count that runs exactly those (case shard + k * shards, k < cases run).
std::string fixed_cases_line(const std::vector<std::string>& args, const fuzz::CampaignResult& r) {
  std::string line = "ssmcheck";
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--duration" || a == "--cases") {
      ++i;
      continue;
    }
    if (a.rfind("--duration=", 0) == 0 || a.rfind("--cases=", 0) == 0) continue;
    line += " " + fuzz::shell_quoted(a);
  }
  return line + " --cases " + std::to_string(r.shard + (r.cases - 1) * r.shards + 1);
}

// The verdict of one test case (fuzz: the campaign; check: the script).
replay::GateResult one_case(const std::string& tool, uint64_t seed, const std::string& suite, const std::string& name,
                            bool pass, const std::string& message, const std::string& details = "", double seconds = 0,
                            int shrunk_ops = -1, nlohmann::json evidence = nullptr) {
  replay::GateResult v;
  v.tool = tool;
  v.seed = seed;
  v.seconds = seconds;
  replay::GateCase c;
  c.suite = suite;
  c.name = name;
  c.seconds = seconds;
  c.status = pass ? replay::GateCase::Status::pass : replay::GateCase::Status::fail;
  c.message = message;
  c.details = details;
  if (shrunk_ops >= 0) c.shrunk_ops = shrunk_ops;
  c.evidence = std::move(evidence);
  v.cases.push_back(c);
  return v;
}

// Written before the work (what a kill -9 leaves) and armed for a fatal signal (cli/crash_verdict.h).
// `crash` is emplaced in place: a CrashVerdict disarms when destroyed, so it is never moved.
void arm_one_case(std::optional<CrashVerdict>& crash, const VerdictFiles& files, const std::string& tool,
                  uint64_t seed, const std::string& suite, const std::string& name) {
  if (!files.any()) return;
  // the unfinished verdict goes to files only: stdout ("-") gets one verdict, the final one
  VerdictFiles on_disk = files;
  if (on_disk.junit == "-") on_disk.junit.clear();
  if (on_disk.json == "-") on_disk.json.clear();
  on_disk.write(one_case(tool, seed, suite, name, false, "started but has not finished (killed, or still running)"));
  crash.emplace(files.junit, files.json);
  const replay::GateResult crashed =
      one_case(tool, seed, suite, name, false,
               "crashed: the process died on a fatal signal during the " +
                   std::string(tool == "ssmcheck fuzz" ? "campaign" : "check") + " (see its stderr)");
  crash->update(crashed.junit(), files::json_text(crashed.json()) + "\n");
}

int run_fuzz(const FuzzFlags& f) {
  check_output_dir(f.out, "--out");
  f.verdict.prepare();
  f.html.prepare();
  reserve_stdout_for(f.html.path);
  fuzz::CampaignOptions o;
  o.seed = f.seed;
  o.cases = f.cases;
  std::tie(o.shard, o.shards) = parse_shard(f.shard);
  o.max_ops = f.max_ops;
  o.duration_s = f.duration;
  o.shrink = !f.no_shrink;
  if (!f.preset.empty()) {
    check_layers_flag(f.layers, make_preset(f.preset), "preset " + f.preset);
    o.preset = make_preset(f.preset, f.layers).name;
  }
  if (!f.config.empty()) {
    check_layers_flag(f.layers, describe_hf_config(f.config), "config.json " + f.config);
    (void)model_from_hf_config(f.config, f.layers);  // a bad config fails here, naming file and field
    o.config_path = f.config;
  }
  if (!f.h_mode.empty()) o.h_mode = parse_h_mode(f.h_mode);
  o.layers = f.layers;
  o.out_dir = f.out;
  o.backend_label = f.backend;
  o.tolerances = f.tol.resolve();
  const fuzz::BackendEntry be = find_backend(f.backend);
  o.numerics = f.numerics.resolve(be.numerics);
  o.caps = be.caps;
  o.rerun_in_python = be.python_class;
  // a fixed model or h mode outside what the backend runs: nothing could be checked (exit 5)
  if (o.h_mode && !be.caps.runs(*o.h_mode))
    throw BackendUnavailable("--h-mode " + f.h_mode + ": " + be.caps.cannot_run(ModelSpec{}, *o.h_mode, be.name));
  if (!be.caps.other_numerics && !o.numerics.is_contract())
    throw BackendUnavailable(o.numerics.flags().substr(1) + ": " + be.name +
                             " implements the contract's numerics only");
  if (o.preset || o.config_path) {
    const ModelSpec spec =
        o.config_path ? model_from_hf_config(*o.config_path, f.layers) : make_preset(*o.preset, f.layers);
    if (const std::string why = be.cannot_run(spec); !why.empty())
      throw BackendUnavailable((o.config_path ? "--config " + *o.config_path : "--preset " + f.preset) + ": " + why);
  }
  o.strictness = be.strictness;
  o.pause_async = f.pause_async;
  o.require_coverage = f.require_coverage;
  // a terminal gets one status line rewritten in place; a pipe or file gets plain lines
  const bool tty = isatty(2);
  o.progress = [tty](const std::string& line) {
    fmt::print(stderr, tty ? "\r\033[Kssmcheck fuzz: {}" : "ssmcheck fuzz: {}\n", line);
    std::fflush(stderr);
  };
  if (f.jobs > 1 && f.duration > 0)
    throw std::invalid_argument("--jobs runs a campaign of fixed cases; --duration (exploratory) runs in one process");
  // drawn presets with --layers N: cut to N where they have more, whole where they have fewer (said)
  const std::string cut =
      f.layers > 0 && !o.preset && !o.config_path
          ? fmt::format(", drawn presets cut to their first {} layers (those with fewer run whole)", f.layers)
          : "";
  fmt::print(
      "ssmcheck fuzz: seed {}, {}{} cases{} of up to {} ops{}, {} vs {}{}{}\n", f.seed,
      f.duration > 0 ? "at most " : "", f.cases,
      o.shards > 1 ? fmt::format(" (shard {}/{}: those with i % {} == {})", o.shard, o.shards, o.shards, o.shard) : "",
      f.max_ops, cut, be.model_name, be.under_test_label(),
      f.duration > 0 ? fmt::format(", for {} s (exploratory: the cases that run depend on the machine)", f.duration)
                     : "",
      jobs_banner(f.jobs));
  const std::string suite = "campaign." + be.name, name = fmt::format("seed {}", f.seed);
  std::optional<CrashVerdict> crash;
  arm_one_case(crash, f.verdict, "ssmcheck fuzz", f.seed, suite, name);
  if (!f.case_records.empty()) {
    auto out = std::make_shared<std::ofstream>(f.case_records);
    if (!*out) throw std::invalid_argument("--case-records " + f.case_records + ": cannot be written");
    o.on_case = [out](const fuzz::CaseRecord& r) { *out << fuzz::to_json_line(r) << '\n' << std::flush; };
  }
  fuzz::CampaignResult r;
  try {
    r = f.jobs > 1 ? run_campaign_in_processes(o, f.jobs, own_command_line(), be)
                   : fuzz::run_campaign(o, be.model, be.under_test);
  } catch (const fuzz::Interrupted& e) {  // the verdict files say so; main() makes it exit 2
    if (f.verdict.any())
      f.verdict.write(one_case("ssmcheck fuzz", f.seed, suite, name, false, std::string("interrupted: ") + e.what(),
                               e.what(), 0.0, -1));
    throw;
  }
  if (tty) fmt::print(stderr, "\n");
  fmt::print("{}", r.summary());
  if (f.duration > 0 && r.cases > 0)  // the cases a time bound ran, as a campaign of fixed cases that runs them again
    fmt::print("  the cases that ran, replayable: {}\n", fixed_cases_line(own_command_line(), r));
  if (f.verdict.any()) {  // one test case: the campaign
    const bool ok = !r.failed && !r.gave_up && r.cases > 0 && r.coverage_missing.empty() && r.bias.empty();
    const std::string message = r.failed          ? fmt::format("case {} FAILED, rerun: {}", r.failed_case, r.rerun)
                                : r.gave_up       ? "gave up: " + r.message
                                : r.cases == 0    ? std::string("no case ran")
                                : !r.bias.empty() ? "bias check failed: " + r.bias.front()
                                : !r.coverage_missing.empty() ? std::string("coverage check failed")
                                                              : fmt::format("{} cases, {} sequences, {} ops: passed",
                                                                            r.cases, r.sequences(), r.ops);
    replay::GateResult v = one_case("ssmcheck fuzz", f.seed, suite, name, ok, message, r.summary(), r.seconds,
                                    r.failed ? r.script_length : -1, r.evidence());
    v.cases_per_campaign = o.cases;
    f.verdict.write(v);
  }
  if (f.html.any()) {
    report::Page page;
    page.title = fmt::format("ssmcheck fuzz: seed {}, {} vs {}", f.seed, be.model_name, be.under_test_label());
    page.subtitle = r.case_range() + (r.failed ? ": FAILED, rerun: " + r.rerun : "");
    if (r.failed) {  // the shrunk case again, in lockstep, every tensor of every op recorded
      const fuzz::ReplayResult shrunk = fuzz::check_script(r.config, parse_script(r.script), be.model, be.under_test,
                                                           o.tolerances, o.strictness, "", nullptr, o.pause_async);
      const report::DivergenceGrid grid = report::grid_of(shrunk, "the shrunk case: " + r.case_flags);
      page.add(grid.divergence_map());
      page.add(grid.error_growth());
    }
    page.add(report::coverage_section(r.coverage, r.coverage_missing, "Coverage of the campaign"));
    page.add(report::text_section("Text report", r.summary()));
    f.html.write(page);
  }
  if (r.gave_up) return kExitBadInput;
  if (r.failed || !r.coverage_missing.empty() || !r.bias.empty()) return kExitDiffer;
  return r.cases == 0 ? kExitNothingRan : kExitOk;
}

int run_check(const CaseOptions& opt, const std::string& ops, const ToleranceOptions& tol,
              const std::string& dump, bool pause_async, const VerdictFiles& verdict, const HtmlOption& html) {
  if (!dump.empty()) prepare_output_file(dump + ".model.h5", "--dump");
  verdict.prepare();
  html.prepare();
  reserve_stdout_for(html.path);
  const CaseConfig cfg = opt.resolve();
  const std::vector<Op> script = parse_script(resolve_ops(ops));
  const fuzz::BackendEntry be = find_backend(opt.backend);
  const std::string suite = "check." + be.name, name = cfg.flags();
  std::optional<CrashVerdict> crash;
  arm_one_case(crash, verdict, "ssmcheck check", cfg.gen.seed, suite, name);
  const fuzz::ReplayResult r = fuzz::check_script(cfg, script, be.model, be.under_test, tol.resolve(), be.strictness,
                                                  dump, nullptr, pause_async);
  fmt::print("ssmcheck check: {} ops of {} on {}: {} vs {}: {}\n", r.ops, script.size(), cfg.flags(), be.model_name,
             be.under_test_label(), r.pass ? "agree" : "DIVERGED");
  // a convention the implementation computes without declaring it (or a slip), confirmed by a rerun
  // under it; it outranks what the diverging fields resemble
  const std::vector<std::string> hints =
      r.pass ? std::vector<std::string>{}
             : fuzz::convention_hints(cfg, script, be.model, be.under_test, tol.resolve(), be.strictness, nullptr,
                                      pause_async, be.name);
  const std::string report = cmp::outranked_by_reruns(r.report, hints.size());
  fmt::print("{}", report);
  for (const std::string& h : hints) fmt::print("  likely cause: {}\n", h);
  if (!dump.empty()) fmt::print("  wrote {}.model.h5 and {}.sut.h5\n", dump, dump);
  if (html.any()) {
    report::Page page;
    page.title = fmt::format("ssmcheck check: {} vs {}", be.model_name, be.under_test_label());
    page.subtitle = cfg.flags();
    const report::DivergenceGrid grid = report::grid_of(r, "the op script");
    page.add(grid.divergence_map());
    page.add(grid.error_growth());
    page.add(report::text_section("Text report", r.pass ? "agree\n" : report));
    html.write(page);
  }
  const bool nothing = r.pass && r.accepted == 0;  // both sides refused every op: no state was compared
  if (verdict.any())
    verdict.write(one_case(
        "ssmcheck check", cfg.gen.seed, suite, name, r.pass && !nothing,
        nothing  ? std::string("every op was refused by both sides: nothing was checked")
        : r.pass ? fmt::format("{} ops agree", r.ops)
                 : fmt::format("DIVERGED after {} ops", r.ops),
        report +
            [&] {
              std::string t;
              for (const std::string& h : hints) t += "  likely cause: " + h + "\n";
              return t;
            }(),
        0, -1,
        r.pass ? nlohmann::json(nullptr)
               : nlohmann::json{{"case_flags", cfg.flags()},
                                {"config", fuzz::config_json(cfg)},
                                {"script", to_string(script)},
                                {"failed_op", r.failed_op},
                                {"op", r.failed_op >= 0 ? r.op_labels[size_t(r.failed_op)] : ""},
                                {"divergence", r.divergence},
                                {"convention_hints", hints}}));
  if (nothing) {
    fmt::print("ssmcheck check: every op was refused by both sides: nothing was checked\n");
    return kExitNothingRan;
  }
  return r.pass ? kExitOk : kExitDiffer;
}

}  // namespace

void add_fuzz_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("fuzz", "random op sequences through the reference and a backend, in lockstep");
  auto f = std::make_shared<FuzzFlags>();
  cmd->add_option("--seed", f->seed, "campaign seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--cases", f->cases, "cases (op sequences); with --duration, an upper bound")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--max-ops", f->max_ops, "longest op sequence")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--duration", f->duration,
                  "exploratory: run cases until SECONDS have passed (checked between cases); the cases that run "
                  "then depend on the machine's speed, so the gate never does this")
      ->check(finite_seconds());
  cmd->add_option("--backend", f->backend, "system under test: " + backend_choices() + " (reference: its alternate path)")
      ->capture_default_str();
  auto* preset = cmd->add_option("--preset", f->preset, "fixed preset (default: drawn from the small odd presets)");
  cmd->add_option("--config", f->config, "fixed model from a Hugging Face config.json (docs/hf-config.md)")
      ->excludes(preset);
  cmd->add_option("--layers", f->layers, "with --preset or --config: keep the first N layers");
  cmd->add_option("--h-mode", f->h_mode, "fixed h mode (default: drawn)");
  cmd->add_option("--shard", f->shard, shard_help());
  add_device_option(cmd);
  f->numerics.add_to(cmd);
  cmd->add_option("--out", f->out, "directory for failing cases")->capture_default_str();
  cmd->add_option("--junit", f->verdict.junit, "write JUnit XML (one test case: the campaign; '-': stdout)");
  cmd->add_option("--json", f->verdict.json, "write the verdict as JSON (docs: README, 'Verdicts'; '-': stdout)");
  cmd->add_flag("--no-shrink", f->no_shrink, "report the first failure as found");
  cmd->add_option("--jobs", f->jobs,
                  "run the cases in N processes on this machine; the result is the one-process campaign's")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--case-records", f->case_records, "(internal: --jobs) write a JSON line per case to FILE")
      ->group("");
  cmd->add_flag("--pause-async", f->pause_async,
                "hold the backend's async copies until their reader waits (exposes readers that skip the wait)");
  cmd->add_flag("--require-coverage", f->require_coverage,
                "fail when the campaign never reached a threshold, clamp or configuration axis (as the gate)");
  f->tol.add_to(cmd);
  f->html.add_to(cmd, "coverage; a failure's shrunk case as a divergence map and error growth");
  cmd->callback([=] { *rc = run_fuzz(*f); });
}

void add_check_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("check", "one op script through the reference and a backend, compared after every op");
  auto opt = std::make_shared<CaseOptions>();
  auto ops = std::make_shared<std::string>();
  auto dump = std::make_shared<std::string>();
  auto tol = std::make_shared<ToleranceOptions>();
  auto pause = std::make_shared<bool>(false);
  opt->add_to(cmd);
  cmd->add_option("--ops", *ops, "op script (or @FILE)")->required();
  cmd->add_flag("--pause-async", *pause, "hold the backend's async copies until their reader waits");
  cmd->add_option("--dump", *dump, "write both sides' final states to PREFIX.model.h5 and PREFIX.sut.h5");
  auto verdict = std::make_shared<VerdictFiles>();
  cmd->add_option("--junit", verdict->junit, "write JUnit XML (one test case: the script; '-': stdout)");
  cmd->add_option("--json", verdict->json, "write the verdict as JSON ('-': stdout)");
  tol->add_to(cmd);
  auto html = std::make_shared<HtmlOption>();
  html->add_to(cmd, "divergence map and error growth of the script");
  cmd->callback([=] { *rc = run_check(*opt, *ops, *tol, *dump, *pause, *verdict, *html); });
}

}  // namespace ssm::cli
