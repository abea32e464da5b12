// `ssmcheck replay TRACE`: runs a trace's ops on a backend (or every available one) and compares
// every recorded state and output; reports the first divergence, refusals, and where it ended.
#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "cli/commands.h"
#include "cli/crash_verdict.h"
#include "cli/device_option.h"
#include "cli/html_option.h"
#include "cli/output_path.h"
#include "cli/tolerance_options.h"
#include "cli/backend_registry.h"
#include "cli/case_options.h"
#include "formats/verdict_text.h"
#include "fuzz/campaign.h"
#include "formats/trace.h"
#include "compare/likely_cause.h"
#include "replay/convention_hints.h"
#include "replay/gate.h"
#include "replay/bisect.h"
#include "replay/replay.h"
#include "replay/start_point.h"
#include "report/divergence_grid.h"
#include "report/sections.h"

namespace ssm::cli {

namespace {

struct ReplayFlags {
  std::vector<std::string> traces;
  std::string backend = "reference", json, junit;
  int from = -1;        // --from OP: start from the recorded full state at or before OP (-1: op 0)
  bool bisect = false;  // --bisect: the first divergent op in segments from recorded states
  bool keep_going = false, bitwise = false, classes = false;
  ToleranceOptions tol;
  HtmlOption html;
  NumericsFlags numerics;  // --gates, --f16-store, --f16-rows: replace what the trace declares, every layer
};

// " --gates torch": the numerics flags given ("" when none).
std::string given_numerics(const NumericsFlags& flags) {
  std::string given;
  for (const auto& [flag, value] : {std::pair{"--gates", flags.gates}, std::pair{"--f16-store", flags.f16_store},
                                    std::pair{"--f16-rows", flags.f16_rows}})
    if (!value.empty()) given += std::string(" ") + flag + " " + value;
  return given;
}
// The trace's layers with the numerics flags given in place of what the trace declares (core/
// layer_spec.h, Numerics); "" when no flag is given, else the line that says so, for the report.
std::string override_numerics(formats::TraceSource& t, const NumericsFlags& flags) {
  const std::string given = given_numerics(flags);
  if (given.empty()) return "";
  size_t changed = 0;
  for (LayerSpec& l : t.header.model.spec.layers) {
    const Numerics n = flags.resolve(l.numerics);
    changed += n == l.numerics ? 0 : 1;
    l.numerics = n;
  }
  return fmt::format("conventions from the command line:{} (on every layer; {} of {} declared otherwise)", given,
                     changed, t.header.model.spec.layers.size());
}

// --from OP: the latest start point at or before OP (replay/start_point.h), said on stdout; -1
// (op 0) when there is none, said too. OP beyond the trace: std::invalid_argument.
int start_for(const formats::TraceSource& t, int op) {
  if (size_t(op) >= t.size())
    throw std::invalid_argument(fmt::format("--from {}: the trace has ops 0..{}", op, int(t.size()) - 1));
  int start = -1;
  for (int s : replay::start_points(t))
    if (s <= op) start = s;
  if (start < 0)
    fmt::print(
        "  --from {}: no op at or before it has a recorded state of every live sequence in every layer ({}): "
        "replaying from op 0\n",
        op, replay::why_not_start(t, op));
  else
    fmt::print("  --from {}: starting from the recorded state after op {} '{}': ops 0..{} are not replayed\n", op,
               start, to_string(t.heads[size_t(start)].op), start);
  return start;
}

std::string describe(const formats::TraceSource& t) {
  const formats::TraceHeader& h = t.header;
  return fmt::format("{} ops, model '{}' ({}), {}, recorded by '{}' (states from '{}')", t.size(), h.model.spec.name,
                     h.model.spec.layers_text(), h.pool.name(), h.producer, h.backend);
}

int run_replay(const ReplayFlags& f) {
  prepare_output_file(f.json, "--json");
  prepare_output_file(f.junit, "--junit");
  f.html.prepare();
  reserve_stdout_for(f.json);
  reserve_stdout_for(f.junit);
  reserve_stdout_for(f.html.path);
  report::Page page;  // --html: per trace and backend a divergence map, error growth and the text report
  page.title = f.traces.size() == 1 ? "ssmcheck replay " + f.traces[0] : fmt::format("ssmcheck replay: {} traces", f.traces.size());
  page.subtitle = fmt::format("backend {}{}{}", f.backend, f.keep_going ? ", --keep-going" : "",
                              f.bitwise ? ", --bitwise" : "");
  replay::GateResult verdict;  // for --junit: one case per trace and backend
  verdict.tool = "ssmcheck replay";
  replay::ReplayOptions o;
  o.tolerances = f.tol.resolve();
  o.margins = f.html.any();  // the HTML map is drawn from them; without it none is kept
  o.strictness = f.bitwise ? cmp::Strictness::bitwise : cmp::Strictness::classes;
  o.same_build_bitwise = !f.classes;
  o.keep_going = f.keep_going;
  (void)f.numerics.resolve(Numerics{});  // a bad --gates / --f16-store / --f16-rows value: exit 2 before any work
  std::vector<std::pair<std::string, std::string>> skipped;
  const auto backends = select_backends(f.backend, &skipped);
  bool diverged = false, bad = false;
  nlohmann::json all = nlohmann::json::array();
  // The JSON verdict: the shared shape (replay::GateResult::json) plus every replay's details.
  auto json_of = [](const replay::GateResult& v, const nlohmann::json& results) {
    nlohmann::json j = v.json();
    j["results"] = results;
    return files::json_text(j) + "\n";
  };
  // The verdict a crash leaves (cli/crash_verdict.h): what finished, and the running step failed
  // as crashed; written first as "unfinished" (what a kill -9 leaves).
  auto with_step = [&](const std::string& suite, const std::string& name, const std::string& message) {
    replay::GateResult v = verdict;
    replay::GateCase c;
    c.suite = suite;
    c.name = name;
    c.status = replay::GateCase::Status::fail;
    c.message = message;
    v.cases.push_back(c);
    nlohmann::json j = all;
    j.push_back({{"trace", name}, {"suite", suite}, {"crashed", message}});
    return std::make_pair(v.junit(), json_of(v, j));
  };
  std::optional<CrashVerdict> crash;
  if (!f.json.empty() || !f.junit.empty()) {
    const auto [junit, json] = with_step("replay", "unfinished", "replay started but has not finished (killed, or still running)");
    // (not on stdout: one verdict there, the final one)
    if (!f.json.empty() && f.json != "-") write_text_atomically(f.json, json, "--json");
    if (!f.junit.empty() && f.junit != "-") write_text_atomically(f.junit, junit, "--junit");
    crash.emplace(f.junit, f.json);
  }
  auto arm = [&](const std::string& suite, const std::string& name) {
    if (!crash) return;
    const auto [junit, json] =
        with_step(suite, name, "crashed: the process died on a fatal signal here (see its stderr)");
    crash->update(junit, json);
  };
  // a trace that cannot be read, at open or at an op a replay reached: reported, the next one replayed
  auto bad_trace = [&](const std::string& path, const formats::FormatError& e) {
    fmt::print(stderr, "ssmcheck replay: bad trace: {}\n", e.what());
    all.push_back({{"trace", path}, {"bad_input", e.what()}});
    replay::GateCase c;
    c.suite = "replay";
    c.name = path;
    c.status = replay::GateCase::Status::fail;
    c.message = std::string("bad trace: ") + e.what();
    verdict.cases.push_back(c);
    bad = true;
  };
  // every trace is replayed, a bad one reported and skipped: nothing already checked is lost
  for (const std::string& path : f.traces) {
    // read op by op: the replay holds the live state and one op, whatever the trace's length
    std::unique_ptr<formats::TraceSource> source;
    arm("replay.read", path);
    try {
      source = formats::open_trace(path);
    } catch (const formats::FormatError& e) {
      bad_trace(path, e);
      continue;
    }
    formats::TraceSource& trace = *source;
    const std::string overridden = override_numerics(trace, f.numerics);
    fmt::print("ssmcheck replay: {}: {}\n", trace.source, describe(trace));
    if (!overridden.empty()) fmt::print("  {}\n", overridden);
    for (const auto& s : skipped) fmt::print("  backend {}: skipped ({})\n", s.first, s.second);
    for (const auto& be : backends) {
      const std::string why_not = replay::cannot_replay(trace, be.caps, be.name);
      if (!why_not.empty()) {  // outside what this backend runs: skipped, with the reason
        fmt::print("  backend {}: skipped ({})\n", be.name, why_not);
        replay::GateCase c;
        c.suite = "replay." + be.name;
        c.name = path;
        c.status = replay::GateCase::Status::skipped;
        c.message = "skipped: " + why_not;
        verdict.cases.push_back(c);
        all.push_back({{"trace", path}, {"backend", be.name}, {"skipped", why_not}});
        continue;
      }
      arm("replay." + be.name, path);
      auto backend = be.make();
      replay::ReplayResult r;
      std::string bisected;        // --bisect: the segments it ran
      nlohmann::json bisect_json;  // and its JSON (the last segment's result with "bisect")
      try {
        replay::ReplayOptions from = o;
        if (f.from >= 0) from.start = start_for(trace, f.from);
        if (f.bisect) {
          const replay::BisectResult b = replay::bisect_trace(trace, *backend, o);
          bisected = b.text().substr(0, b.text().size() - b.last.text().size());
          r = b.last;
          bisect_json = b.json();
        } else {
          r = replay::replay_trace(trace, *backend, from);
        }
      } catch (const formats::FormatError& e) {  // an op its replay reached is malformed (formats::open_trace)
        bad_trace(path, e);
        break;
      } catch (const std::invalid_argument& e) {
        if (f.from >= 0 || f.bisect)  // not a start, a backend without import_state, or a bad model
          fmt::print(stderr, "ssmcheck replay: {}: on {}: {}\n", trace.source, be.name, e.what());
        else
          fmt::print(stderr, "ssmcheck replay: {}: {} rejects the trace's model or pool: {}\n", trace.source, be.name,
                     e.what());
        all.push_back({{"trace", path}, {"backend", be.name}, {"bad_input", e.what()}});
        bad = true;
        continue;
      }
      // a convention the trace's producer computed without declaring it (or a slip), confirmed by a
      // rerun under it; it outranks what the diverging fields resemble
      const std::vector<std::string> hints =
          r.pass() || f.bisect || f.from >= 0
              ? std::vector<std::string>{}
              : replay::convention_hints(trace, be.make, o, r.divergences.front().op_index, r.bitwise);
      const std::string text = cmp::outranked_by_reruns(r.text(), hints.size());
      fmt::print("-- on {}\n{}{}", be.name, bisected, text);
      if (trace.header.expect)
        fmt::print("  deliberately faulty trace: expected the first divergence at {}: {}\n",
                   trace.header.expect->text(), r.matches(*trace.header.expect) ? "pinpointed" : "NOT MATCHED");
      for (const std::string& h : hints) fmt::print("  likely cause: {}\n", h);
      if (!r.pass()) {  // the whole --backend text (its options), through the bridge for a Python class
        const std::string args =
            fmt::format("replay {} --backend {}{}", fuzz::shell_quoted(path), be.flag, given_numerics(f.numerics));
        fmt::print("  rerun: {}\n", be.python_class ? fuzz::python_rerun(args) : "ssmcheck " + args);
      }
      diverged = diverged || !r.pass();
      if (f.html.any()) {
        const report::DivergenceGrid grid = report::grid_of(trace, r);
        page.add(grid.divergence_map());
        page.add(grid.error_growth());
        page.add(report::text_section("Text report: " + trace.source + " on " + be.name, text));
      }
      all.push_back(f.bisect ? bisect_json : r.json());
      if (!overridden.empty()) all.back()["conventions_overridden"] = overridden;
      if (!hints.empty()) all.back()["convention_hints"] = hints;
      replay::GateCase c;
      c.suite = "replay." + be.name;
      c.name = path;
      c.status = r.pass() ? replay::GateCase::Status::pass : replay::GateCase::Status::fail;
      c.message = r.pass() ? fmt::format("agree: {} ops, {} states, {} outputs", r.ops_run, r.states_compared,
                                         r.outputs_compared)
                           : "diverged at " + r.divergences.front().headline();
      if (!r.pass()) c.details = text;
      for (const std::string& h : hints) c.details += "likely cause: " + h + "\n";
      verdict.cases.push_back(c);
    }
  }
  const int skips = verdict.count(replay::GateCase::Status::skipped);
  const bool nothing = !bad && !diverged && verdict.nothing_checked();
  if (f.traces.size() > 1 || skips)
    fmt::print("ssmcheck replay: {} traces: {}{}\n", f.traces.size(),
               bad        ? "BAD INPUT"
               : diverged ? "DIVERGED"
               : nothing  ? "NOTHING CHECKED"
                          : "all agree",
               skips ? fmt::format(" ({} of {} checks skipped)", skips, verdict.cases.size()) : "");
  if (!f.json.empty()) write_text_atomically(f.json, json_of(verdict, all), "--json");
  if (!f.junit.empty()) write_text_atomically(f.junit, verdict.junit(), "--junit");
  if (f.html.any()) {
    page.add(report::checks_section(verdict, "Verdict: one check per trace and backend"));
    f.html.write(page);
  }
  if (nothing)
    fmt::print(stderr, "ssmcheck replay: nothing was checked: every replay was skipped (see the reasons above)\n");
  return bad ? kExitBadInput : diverged ? kExitDiffer : nothing ? kExitNothingRan : kExitOk;
}

}  // namespace

void add_replay_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("replay", "replay a state trace on a backend and compare every recorded state");
  auto f = std::make_shared<ReplayFlags>();
  cmd->add_option("traces", f->traces, "trace files (or unfinished captures TRACE.partial/)")->required();
  cmd->add_option("--backend", f->backend, "all (every available built-in) or " + backend_choices())->capture_default_str();
  add_device_option(cmd);
  cmd->add_flag("--keep-going", f->keep_going, "go on past the first divergence");
  auto* from = cmd->add_option("--from", f->from,
                               "start from the recorded state of every live sequence at or before op OP (the latest "
                               "op whose states cover every layer; docs/trace-format.md, Replay from anywhere)")
                   ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--bisect", f->bisect,
                "find the first divergent op in segments that start from recorded states (O(log n) segments)")
      ->excludes(from)
      ->excludes("--keep-going");
  cmd->add_flag("--bitwise", f->bitwise, "compare every tensor bit for bit");
  cmd->add_flag("--classes", f->classes,
                "judge under the tolerance classes even a trace this backend and build recorded (bitwise by default)")
      ->excludes("--bitwise");
  cmd->add_option("--json", f->json, "write the results as JSON");
  cmd->add_option("--junit", f->junit, "write JUnit XML (one test case per trace and backend)");
  f->tol.add_to(cmd);
  f->html.add_to(cmd, "divergence map and error growth per trace and backend");
  f->numerics.add_to(cmd);  // the same flags as run, check and fuzz (cli/case_options.h)
  cmd->callback([=] { *rc = run_replay(*f); });
}

}  // namespace ssm::cli
