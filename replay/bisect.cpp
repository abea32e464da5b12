// Bisection of a trace over its recorded states (see bisect.h).
#include "replay/bisect.h"

#include <fmt/core.h>

#include "replay/start_point.h"

namespace ssm::replay {

BisectResult bisect_trace(const formats::Trace& trace, Backend& b, const ReplayOptions& options) {
  formats::MemoryTrace tr(trace);
  return bisect_trace(tr, b, options);
}

BisectResult bisect_trace(formats::TraceSource& tr, Backend& b, const ReplayOptions& options) {
  BisectResult r;
  r.boundaries = start_points(tr);
  const int last = int(tr.size()) - 1;
  if (r.boundaries.empty() || r.boundaries.back() != last) r.boundaries.push_back(last);
  // lo: the boundary the next segment starts after (-1: a fresh pool); every op up to it agreed
  int lo = -1;
  const int m = int(r.boundaries.size()) - 1;  // index of the last boundary
  while (true) {
    const int mid = lo + (m - lo + 1) / 2;  // halfway to the end, rounded up: at least lo + 1
    ReplayOptions o = options;
    o.start = lo < 0 ? -1 : r.boundaries[size_t(lo)];
    o.stop = r.boundaries[size_t(mid)];
    o.keep_going = false;
    ReplayResult rr = replay_trace(tr, b, o);
    r.segments.push_back(BisectSegment{o.start, o.stop, rr.pass(), rr.ops_run});
    r.ops_replayed += rr.ops_run;
    // what every segment compared, as one replay would report it
    rr.states_compared += r.last.states_compared;
    rr.outputs_compared += r.last.outputs_compared;
    rr.overflow_straddles_adopted += r.last.overflow_straddles_adopted;
    rr.refusals.insert(rr.refusals.begin(), r.last.refusals.begin(), r.last.refusals.end());
    rr.margins.insert(rr.margins.begin(), r.last.margins.begin(), r.last.margins.end());
    r.last = std::move(rr);
    if (!r.last.pass() || mid == m) break;
    lo = mid;
  }
  r.ops_skipped = int(tr.size()) - r.ops_replayed;
  r.last.ops_run = r.ops_replayed;
  r.last.ops_skipped = r.ops_skipped;
  return r;
}

std::string BisectResult::text() const {
  std::string s = fmt::format("  bisect: {} boundaries (recorded full states and the last op), {} segment(s):\n",
                              boundaries.size(), segments.size());
  for (const BisectSegment& g : segments)
    s += fmt::format("    ops {}..{} from {}: {} ({} ops)\n", g.start + 1, g.stop,
                     g.start < 0 ? std::string("a fresh pool") : fmt::format("the recorded state after op {}", g.start),
                     g.pass ? "agree" : "DIVERGED", g.ops_run);
  s += fmt::format("  bisect: {} ops replayed, {} not replayed{}\n", ops_replayed, ops_skipped,
                   pass() ? "" : " (after the first divergence)");
  return s + last.text();
}

nlohmann::json BisectResult::json() const {
  nlohmann::json j = last.json();
  nlohmann::json segs = nlohmann::json::array();
  for (const BisectSegment& g : segments)
    segs.push_back({{"start_after", g.start}, {"stop", g.stop}, {"pass", g.pass}, {"ops_run", g.ops_run}});
  j["bisect"] = {{"boundaries", boundaries.size()},
                 {"segments", segs},
                 {"ops_replayed", ops_replayed},
                 {"ops_skipped", ops_skipped}};
  return j;
}

}  // namespace ssm::replay
