// `replay --bisect`: the first divergent op of a trace, found in segments that each start from a
// recorded state (replay/start_point.h) instead of op 0. The boundaries are the trace's start
// points and its last op; each segment starts where the last one agreed and runs to the boundary
// halfway to the end of the remaining range, so at most ceil(log2(boundaries)) + 1 segments run,
// and a segment that diverges names the first divergent op (every recorded state, output and
// refusal in it is compared). Counterparts: replay/replay.h, cli/cmd_replay.cpp, docs/trace-format.md.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "replay/replay.h"

namespace ssm::replay {

struct BisectSegment {
  int start = -1, stop = -1;  // replayed ops start+1 .. stop (start -1: from a fresh pool)
  bool pass = true;
  int ops_run = 0;
};

struct BisectResult {
  std::vector<int> boundaries;          // the start points, then the last op
  std::vector<BisectSegment> segments;  // in the order they ran
  ReplayResult last;                    // the last segment's replay: its first divergence, if any
  int ops_replayed = 0;                 // over every segment
  int ops_skipped = 0;                  // ops never replayed (after the divergence)
  bool pass() const { return last.pass(); }
  std::string text() const;
  nlohmann::json json() const;
};

BisectResult bisect_trace(formats::TraceSource& trace, Backend& backend, const ReplayOptions& options = {});
BisectResult bisect_trace(const formats::Trace& trace, Backend& backend, const ReplayOptions& options = {});

}  // namespace ssm::replay
