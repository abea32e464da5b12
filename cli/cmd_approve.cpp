// `ssmcheck approve TRACE... --backend B`: the approval step of golden traces across rebuilds. A trace
// records the numerics that produced its states (TraceHeader::build: Backend::numerics_id); a rebuild
// that changed them is judged under the classes only. approve replays each trace bit for bit on B
// and, where B's numerics reproduce every recorded state and output exactly, re-stamps the trace
// with them (formats/trace_stamp.h) so replay and the gate promise bits again; where they do not,
// it says what differs first and that the trace needs re-recording. docs/trace-format.md, "Bits
// across rebuilds".
#include <fmt/core.h>

#include "cli/backend_registry.h"
#include "cli/commands.h"
#include "cli/device_option.h"
#include "formats/dump.h"
#include "formats/trace.h"
#include "formats/trace_stamp.h"
#include "replay/replay.h"

namespace ssm::cli {

namespace {

struct ApproveFlags {
  std::vector<std::string> traces;
  std::string backend = "reference";
  bool dry_run = false;
};

int run_approve(const ApproveFlags& f) {
  std::vector<std::pair<std::string, std::string>> skipped;
  const auto backends = select_backends(f.backend, &skipped);
  if (backends.size() != 1) {
    fmt::print(stderr, "ssmcheck approve: --backend {}: {}\n", f.backend,
               skipped.empty() ? "name one backend" : "not available: " + skipped.front().second);
    return kExitBadInput;
  }
  const auto& be = backends.front();
  int approved = 0, current = 0, differ = 0, bad = 0, other = 0;
  // a trace that cannot be read, at open or at an op a replay reached (formats::open_trace)
  auto bad_trace = [&](const formats::FormatError& e) {
    fmt::print(stderr, "ssmcheck approve: bad trace: {}\n", e.what());
    ++bad;
  };
  for (const std::string& path : f.traces) {
    std::unique_ptr<formats::TraceSource> source;  // read op by op, as replay reads it
    try {
      source = formats::open_trace(path);
    } catch (const formats::FormatError& e) {
      bad_trace(e);
      continue;
    }
    formats::TraceSource& trace = *source;
    if (!trace.finished) {
      fmt::print(stderr, "ssmcheck approve: {}: an unfinished capture ({}); only a finished trace is re-stamped\n",
                 path, trace.source);
      ++bad;
      continue;
    }
    if (trace.header.backend != be.name) {
      fmt::print("{}: not approved on {}: its states come from '{}' (approve it on that backend)\n", path, be.name,
                 trace.header.backend);
      ++other;
      continue;
    }
    const std::string why_not = replay::cannot_replay(trace, be.caps, be.name);
    if (!why_not.empty()) {
      fmt::print("{}: not approved: {}\n", path, why_not);
      ++other;
      continue;
    }
    auto backend = be.make();
    const std::string here = formats::build_id(*backend);
    if (trace.header.build == here) {
      fmt::print("{}: already stamped with these numerics ({})\n", path, here);
      ++current;
      continue;
    }
    replay::ReplayOptions o;
    o.strictness = cmp::Strictness::bitwise;
    o.margins = false;
    replay::ReplayResult r;
    try {
      r = replay::replay_trace(trace, *backend, o);
    } catch (const formats::FormatError& e) {
      bad_trace(e);
      continue;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "ssmcheck approve: {}: {} rejects the trace's model or pool: {}\n", path, be.name, e.what());
      ++bad;
      continue;
    }
    const std::string was = trace.header.build.empty() ? "no recorded build" : trace.header.build;
    if (!r.pass()) {
      // what the new numerics do to it under the classes: a kernel change that stays inside them, or a bug
      o.strictness = cmp::Strictness::classes;
      o.same_build_bitwise = false;
      replay::ReplayResult rc;
      try {
        rc = replay::replay_trace(trace, *be.make(), o);
      } catch (const formats::FormatError& e) {  // it went past where the first stopped
        bad_trace(e);
        continue;
      }
      fmt::print(
          "{}: NOT approved: {} differs from '{}' bit for bit, first at {}; under the tolerance classes it {}.\n"
          "  Re-record it with these numerics (the fixtures: BACKEND={} scripts/record_golden.sh) and review the "
          "change.\n",
          path, here, was, r.divergences.front().headline(),
          rc.pass() ? "agrees" : "DIVERGES at " + rc.divergences.front().headline() + " (a bug, not a rebuild?)",
          be.name);
      ++differ;
      continue;
    }
    if (!f.dry_run) {
      try {
        formats::stamp_trace_build(path, here);
      } catch (const formats::FormatError& e) {
        fmt::print(stderr, "ssmcheck approve: {}\n", e.what());
        ++bad;
        continue;
      }
    }
    fmt::print("{}: {}: reproduced bit for bit ({} ops, {} states, {} outputs); build '{}' -> '{}'\n", path,
               f.dry_run ? "would be approved (--dry-run)" : "approved", r.ops_run, r.states_compared,
               r.outputs_compared, was, here);
    ++approved;
  }
  fmt::print("ssmcheck approve: {} approved, {} already current, {} need re-recording, {} for other backends, {} bad\n",
             approved, current, differ, other, bad);
  return bad ? kExitBadInput : differ ? kExitDiffer : approved + current == 0 ? kExitNothingRan : kExitOk;
}

}  // namespace

void add_approve_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand(
      "approve",
      "re-stamp traces whose recorded states this backend's numerics reproduce bit for bit (after a rebuild)");
  auto f = std::make_shared<ApproveFlags>();
  cmd->add_option("traces", f->traces, "finished trace files")->required();
  cmd->add_option("--backend", f->backend, "the backend whose numerics approve them: " + backend_choices())
      ->capture_default_str();
  add_device_option(cmd);
  cmd->add_flag("--dry-run", f->dry_run, "say what would be approved; change no file");
  cmd->callback([=] { *rc = run_approve(*f); });
}

}  // namespace ssm::cli
