// Where a replay may start other than at op 0: after an op whose recorded states cover every live
// sequence in every layer (and the f16-pool stage), from which a backend is rebuilt with
// Backend::import_state, and after which no op restores a prefix-cache snapshot saved before it
// (snapshots are not part of a recorded state). Users: replay/replay.cpp (ReplayOptions::start),
// `replay --from` / `--bisect` (replay/bisect.h), `reduce` (replay/reduce.h); docs/trace-format.md.
// Each reads only the ops' heads (formats::TraceOpHead), never their data; the Trace overloads wrap it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "formats/trace.h"

namespace ssm::replay {

struct StartPoint {
  int after_op = -1;                       // the op after which the recorded states are the start; -1: a fresh pool
  std::vector<std::pair<int, int>> slots;  // live logical sequence -> pool slot, ascending seq
};

// The slots every op leaves live, by the contract's alloc rule (the smallest free slot whose
// capacity fits, lowest index on ties) over the ops the trace accepted: entry i is after op i.
// Stops (shorter result) at an op the contract refuses that the trace accepted.
std::vector<std::vector<std::pair<int, int>>> live_slots(const formats::TraceSource& trace);
std::vector<std::vector<std::pair<int, int>>> live_slots(const formats::Trace& trace);

// Every op after which a replay may start, ascending (not -1).
std::vector<int> start_points(const formats::TraceSource& trace);
std::vector<int> start_points(const formats::Trace& trace);

// The start after `op` (-1: op 0, from the trace's own start states, TraceHeader::start: usually
// none, an empty pool). Throws std::invalid_argument saying why `op` is not one.
StartPoint start_point(const formats::TraceSource& trace, int op);
StartPoint start_point(const formats::Trace& trace, int op);

// Why op `op` is not a start point ("" when it is).
std::string why_not_start(const formats::TraceSource& trace, int op);
std::string why_not_start(const formats::Trace& trace, int op);

}  // namespace ssm::replay
