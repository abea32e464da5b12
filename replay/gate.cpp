// The CI gate (see gate.h).
#include "replay/gate.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fmt/core.h>
#include <map>

#include "formats/trace.h"
#include "formats/verdict_text.h"
#include "fuzz/campaign.h"
#include "replay/replay.h"

namespace ssm::replay {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::string> traces_in(const std::string& dir) {
  std::vector<std::string> v;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return v;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".h5") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// The layers of a model by shape and options, for matching a trace against --preset / --config.
std::vector<std::string> layer_names(const ModelSpec& m) {
  std::vector<std::string> v;
  for (const LayerSpec& l : m.layers) v.push_back(l.name());
  return v;
}

// "" when the trace is inside the gate's filters (--h-mode, --preset, --config); else why not.
std::string outside_filters(const formats::TraceSource& tr, const GateOptions& o) {
  const HMode m = tr.header.pool.h_mode;
  if (!o.h_modes.empty() && std::find(o.h_modes.begin(), o.h_modes.end(), m) == o.h_modes.end())
    return std::string("h mode ") + to_string(m) + " (the gate checks --h-mode " + [&] {
      std::string s;
      for (HMode x : o.h_modes) s += (s.empty() ? "" : ",") + std::string(to_string(x));
      return s;
    }() + " only)";
  if (o.model && layer_names(tr.header.model.spec) != layer_names(*o.model))
    return "another model (the gate checks " +
           (o.config_path ? "--config " + *o.config_path : "--preset " + o.preset.value_or("")) + " only)";
  return "";
}

// Replays one trace file; golden: must agree; faulty: must diverge at its expectation.
GateCase replay_case(const std::string& path, const fuzz::BackendEntry& be, bool faulty, const GateOptions& o) {
  GateCase c;
  c.suite = std::string(faulty ? "replay.faulty." : "replay.golden.") + be.name;
  c.name = fs::path(path).filename().string();
  const auto start = Clock::now();
  try {
    const std::unique_ptr<formats::TraceSource> source = formats::open_trace(path);  // read op by op
    formats::TraceSource& tr = *source;
    const std::string why_not =
        outside_filters(tr, o).empty() ? cannot_replay(tr, be.caps, be.name) : outside_filters(tr, o);
    if (!why_not.empty()) {  // outside what the backend runs, or what the gate was asked to check
      c.status = GateCase::Status::skipped;
      c.message = "skipped: " + why_not;
      c.seconds = since(start);
      return c;
    }
    auto backend = be.make();
    ReplayOptions ro;
    ro.tolerances = o.tolerances;
    ro.margins = false;  // the gate draws no map: the replay holds the live state and one op
    const ReplayResult r = replay_trace(tr, *backend, ro);
    c.path = path;
    if (!faulty) {
      c.status = r.pass() ? GateCase::Status::pass : GateCase::Status::fail;
      c.other_numerics = r.other_numerics;
      c.message = r.pass() ? fmt::format("agree {}: {} ops, {} states, {} outputs",
                                         r.bitwise ? "bit for bit" : "under the classes", r.ops_run, r.states_compared,
                                         r.outputs_compared)
                           : "diverged at " + r.divergences.front().headline();
      if (!r.pass()) c.details = r.text();
    } else if (!tr.header.expect) {
      c.status = GateCase::Status::fail;
      c.message = "faulty trace without expect_op / expect_layer / expect_tensor attributes";
    } else if (r.matches(*tr.header.expect)) {
      c.message = "pinpointed " + r.divergences.front().headline();
    } else {
      c.status = GateCase::Status::fail;
      c.message = fmt::format("expected the first divergence at {}, got {}", tr.header.expect->text(),
                              r.pass() ? "none (the replay agreed)" : r.divergences.front().headline());
      c.details = r.text();
    }
  } catch (const std::exception& e) {
    c.status = GateCase::Status::fail;
    c.message = first_line(e.what());
    c.details = e.what();
  }
  c.seconds = since(start);
  return c;
}

GateCase campaign_case(const fuzz::BackendEntry& be, const GateOptions& o) {
  GateCase c;
  c.suite = "campaign." + be.name;
  c.name = be.campaign_sides();
  fuzz::CampaignOptions co;
  co.seed = o.seed;
  co.cases = o.cases;
  co.shard = o.shard;
  co.shards = o.shards;
  co.max_ops = o.max_ops;
  co.backend_label = be.flag;
  co.numerics = be.numerics;
  co.caps = be.caps;
  co.preset = o.preset;
  co.config_path = o.config_path;
  if (!o.h_modes.empty()) {  // --h-mode: the campaign draws only those it runs among them
    std::vector<HMode> both;
    for (HMode m : co.caps.h_modes)
      if (std::find(o.h_modes.begin(), o.h_modes.end(), m) != o.h_modes.end()) both.push_back(m);
    co.caps.h_modes = both;
  }
  const std::string outside = co.caps.h_modes.empty() ? "it runs none of the h modes the gate checks (--h-mode)"
                              : o.model               ? be.cannot_run(*o.model)
                                                      : "";
  if (!outside.empty()) {
    c.status = GateCase::Status::skipped;
    c.message = "skipped: " + outside;
    return c;
  }
  co.tolerances = o.tolerances;
  co.strictness = be.strictness;
  co.pause_async =
      be.caps.async_copies;  // async copies held until their reader waits: a reader that skips it is caught
  co.require_coverage = o.require_coverage;
  if (o.progress) co.progress = [&](const std::string& line) { o.progress(c.suite + ": " + line); };
  const auto start = Clock::now();
  try {
    const fuzz::CampaignResult r = o.run_campaign ? o.run_campaign(co, be) : fuzz::run_campaign(co, be.model, be.under_test);
    // nothing ran is not a pass
    const bool uncovered = !r.coverage_missing.empty(), biased = !r.bias.empty();
    c.status =
        r.failed || r.gave_up || r.cases == 0 || uncovered || biased ? GateCase::Status::fail : GateCase::Status::pass;
    std::string missing;
    for (const auto& m : r.coverage_missing) missing += (missing.empty() ? "" : ", ") + m;
    c.message = fmt::format("{}, {} sequences, {} ops: {}", r.case_range(), r.sequences(), r.ops,
                            r.failed       ? fmt::format("case {} FAILED, rerun: {}", r.failed_case, r.rerun)
                            : r.gave_up    ? "gave up: " + r.message
                            : r.cases == 0 ? "no case ran"
                            : biased       ? "bias check failed: " + r.bias.front()
                            : uncovered    ? "coverage check failed, never reached: " + missing
                                           : "passed");
    if (c.status == GateCase::Status::fail) c.details = r.summary();
    if (r.failed) {
      c.shrunk_ops = r.script_length;
      c.evidence = r.evidence();
    }
  } catch (const fuzz::Interrupted&) {
    throw;  // a gate that was told to stop stops
  } catch (const std::exception& e) {
    c.status = GateCase::Status::fail;
    c.message = first_line(e.what());
    c.details = e.what();
  }
  c.seconds = since(start);
  return c;
}

std::string xml(const std::string& s) { return files::xml_text(s); }

const char* status_name(GateCase::Status s) {
  return s == GateCase::Status::pass ? "pass" : s == GateCase::Status::fail ? "fail" : "skipped";
}

}  // namespace

int GateResult::count(GateCase::Status s) const {
  return int(std::count_if(cases.begin(), cases.end(), [s](const GateCase& c) { return c.status == s; }));
}

bool GateResult::nothing_checked() const { return count(GateCase::Status::skipped) == int(cases.size()); }

bool GateResult::pass() const {
  return std::none_of(cases.begin(), cases.end(), [](const GateCase& c) { return c.status == GateCase::Status::fail; });
}

std::string GateResult::summary() const {
  // suites in first-seen order, with counts
  std::vector<std::string> order;
  std::map<std::string, std::array<int, 3>> counts;
  std::map<std::string, double> secs;
  for (const GateCase& c : cases) {
    if (!counts.count(c.suite)) order.push_back(c.suite);
    ++counts[c.suite][size_t(c.status)];
    secs[c.suite] += c.seconds;
  }
  std::string s = fmt::format("ssmcheck gate: {} checks in {:.1f} s (seed {}, {} cases per campaign)\n", cases.size(),
                              seconds, seed, cases_per_campaign);
  for (const std::string& suite : order) {
    const auto& n = counts[suite];
    std::string line = fmt::format("  {:<28} {:>3} passed", suite, n[0]);
    if (n[1]) line += fmt::format(", {} FAILED", n[1]);
    if (n[2]) line += fmt::format(", {} skipped", n[2]);
    line += fmt::format("  ({:.1f} s)", secs[suite]);
    for (const GateCase& c : cases)
      if (c.suite == suite && (c.suite.rfind("campaign.", 0) == 0 || c.status == GateCase::Status::skipped))
        line += "\n      " + c.name + ": " + c.message;
    s += line + "\n";
  }
  bool any = false;
  for (const GateCase& c : cases)
    if (c.status == GateCase::Status::fail) {
      if (!any) s += "failures:\n";
      any = true;
      s += fmt::format("  {} {}: {}\n", c.suite, c.name, c.message);
    }
  // golden traces of a backend recorded by other numerics: judged under the classes, one command
  // re-stamps those this build reproduces bit for bit (docs/trace-format.md, "Bits across rebuilds")
  std::map<std::string, std::string> stale;  // backend -> the trace files
  std::map<std::string, int> stale_count;
  for (const GateCase& c : cases)
    if (c.other_numerics) {
      const std::string be = c.suite.substr(std::string("replay.golden.").size());  // a name may hold dots
      stale[be] += " " + c.path;
      ++stale_count[be];
    }
  for (const auto& [be, files] : stale)
    s += fmt::format(
        "{} golden trace(s) recorded by {} with other numerics were judged under the classes, not bit "
        "for bit; re-stamp those these numerics reproduce exactly (the rest need re-recording, "
        "scripts/record_golden.sh):\n  ssmcheck approve --backend {}{}\n",
        stale_count[be], be, be, files);
  const int skipped = count(GateCase::Status::skipped);
  const std::string skips = skipped ? fmt::format(" ({} of {} checks skipped)", skipped, cases.size()) : "";
  s += !pass()             ? "result: FAIL" + skips + "\n"
       : nothing_checked() ? "result: NOTHING CHECKED (every check was skipped)\n"
                           : "result: PASS" + skips + "\n";
  return s;
}

std::string GateResult::junit() const {
  std::vector<std::string> order;
  for (const GateCase& c : cases)
    if (std::find(order.begin(), order.end(), c.suite) == order.end()) order.push_back(c.suite);
  int fails = 0, skips = 0;
  for (const GateCase& c : cases) {
    fails += c.status == GateCase::Status::fail;
    skips += c.status == GateCase::Status::skipped;
  }
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                   xml(tool), cases.size(), fails, skips, seconds);
  for (const std::string& suite : order) {
    int n = 0, f = 0, k = 0;
    double t = 0;
    for (const GateCase& c : cases)
      if (c.suite == suite) {
        ++n;
        f += c.status == GateCase::Status::fail;
        k += c.status == GateCase::Status::skipped;
        t += c.seconds;
      }
    s += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     xml(suite), n, f, k, t);
    for (const GateCase& c : cases) {
      if (c.suite != suite) continue;
      s += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", xml(c.suite), xml(c.name), c.seconds);
      if (c.status == GateCase::Status::pass) {
        s += fmt::format("><system-out>{}</system-out></testcase>\n", xml(c.message));
      } else if (c.status == GateCase::Status::skipped) {
        s += fmt::format("><skipped message=\"{}\"/></testcase>\n", xml(c.message));
      } else {
        s += fmt::format("><failure message=\"{}\">{}</failure></testcase>\n", xml(c.message),
                         xml(c.details.empty() ? c.message : c.details));
      }
    }
    s += "  </testsuite>\n";
  }
  return s + "</testsuites>\n";
}

nlohmann::json GateResult::json() const {
  nlohmann::json j = {{"schema", "ssmcheck-verdict"},
                      {"schema_version", kVerdictSchemaVersion},
                      {"tool", tool},
                      {"pass", pass()},
                      {"seconds", seconds},
                      {"seed", seed},
                      {"cases_per_campaign", cases_per_campaign},
                      {"counts",
                       {{"pass", count(GateCase::Status::pass)},
                        {"fail", count(GateCase::Status::fail)},
                        {"skipped", count(GateCase::Status::skipped)}}},
                      {"nothing_checked", nothing_checked()}};
  j["cases"] = nlohmann::json::array();
  for (const GateCase& c : cases) {
    nlohmann::json e = {{"suite", c.suite},     {"name", c.name},       {"status", status_name(c.status)},
                        {"seconds", c.seconds}, {"message", c.message}, {"details", c.details}};
    if (c.shrunk_ops >= 0) e["shrunk_ops"] = c.shrunk_ops;
    if (c.other_numerics) e["other_numerics"] = true;
    if (!c.evidence.is_null()) e["evidence"] = c.evidence;
    j["cases"].push_back(std::move(e));
  }
  return j;
}

GateResult run_gate(const GateOptions& o,
                    const std::function<void(const GateResult&, const std::string&, const std::string&)>& starting) {
  GateResult res;
  res.seed = o.seed;
  res.cases_per_campaign = o.cases;
  const auto start = Clock::now();
  auto add = [&](GateCase c) {
    if (o.progress)
      o.progress(fmt::format("{} {} {}: {}", status_name(c.status), c.suite, c.name, c.message));
    res.cases.push_back(std::move(c));
  };
  const std::vector<std::string> golden = traces_in(o.traces_dir);
  const std::vector<std::string> faulty = traces_in(o.traces_dir + "/faulty");
  const bool replays = o.shard == 0;  // shard 0 replays the traces; every shard runs its campaign cases
  if (golden.empty() && replays) {
    GateCase c;
    c.suite = "replay.golden";
    c.name = o.traces_dir;
    c.status = GateCase::Status::fail;
    c.message = "no golden traces (*.h5) in " + o.traces_dir;
    add(c);
  }
  auto start_check = [&](const std::string& suite, const std::string& name) {
    if (starting) {
      res.seconds = since(start);
      starting(res, suite, name);
    }
  };
  for (const fuzz::BackendEntry& be : o.backends) {
    if (!replays) break;
    for (const std::string& p : golden) {
      start_check("replay.golden." + be.name, fs::path(p).filename().string());
      add(replay_case(p, be, false, o));
    }
    for (const std::string& p : faulty) {
      start_check("replay.faulty." + be.name, fs::path(p).filename().string());
      add(replay_case(p, be, true, o));
    }
  }
  for (const auto& sk : o.skipped) {
    GateCase c;
    c.suite = "backend." + sk.first;
    c.name = sk.first;
    c.status = GateCase::Status::skipped;
    c.message = "skipped: " + sk.second;
    add(c);
  }
  for (const fuzz::BackendEntry& be : o.backends) {
    start_check("campaign." + be.name, be.campaign_sides());
    add(campaign_case(be, o));
  }
  // half as many cases again on each implementation that offers a perturbed schedule, drawn from the
  // next seed: a bug that holds only in the usual block order, in one wave or while a copy is quick
  // fails there on every run (docs/cuda.md, "Perturbed schedules")
  GateOptions perturbed = o;
  perturbed.seed = o.seed + 1;
  perturbed.cases = std::max(1, o.cases / 2);
  for (const fuzz::BackendEntry& be : o.backends) {
    if (!be.perturbable) continue;
    const fuzz::BackendEntry pe = fuzz::perturbed_entry(be);
    start_check("campaign." + pe.name, pe.campaign_sides());
    add(campaign_case(pe, perturbed));
  }
  res.seconds = since(start);
  return res;
}

}  // namespace ssm::replay
