// `ssmcheck reduce`: delta debugging (ddmin, as C-Reduce and Polygraphy's `debug reduce`) of a
// trace that diverges on a backend, down to a standalone trace that still diverges there in the
// same way. The cut: the trace starts from the recorded full state nearest before the first
// divergence (replay/start_point.h), written as the new trace's /start (formats/trace.h
// TraceHeader::start), and ends at the divergent op with only its evidence; then ddmin removes
// layers, sequences and ops, keeping a candidate only when its replay diverges at its last op with
// the same signature: what, field, sequence, original layer, likely causes, and the mismatch's
// count and worst elements bit for bit (so a removed op changed neither side's values there).
// Counterparts: cli/cmd_reduce.cpp, docs/trace-format.md ("Reduce").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "replay/replay.h"

namespace ssm::replay {

struct ReduceOptions {
  ReplayOptions replay;    // tolerances and strictness; start, stop and keep_going are reduce's
  int max_replays = 2000;  // a bound on the candidates tried (each one replay of a short trace)
};

struct TraceSize {
  int ops = 0, seqs = 0, layers = 0;
  uint64_t bytes = 0;  // of the file (0 until written)
  nlohmann::json json() const;
};

struct ReduceResult {
  bool diverged = false;  // false: the trace agrees on the backend, nothing to reduce
  Divergence original;    // the full replay's first divergence
  int start_after = -1;   // the op of the original after which the reduced trace starts (-1: op 0)
  formats::Trace reduced;  // diverges at its last op
  Divergence reproduced;  // the reduced trace's divergence
  TraceSize before, after;
  int replays = 0;          // candidates replayed
  bool budget_hit = false;  // max_replays reached: smaller may exist
  std::string text() const;
  nlohmann::json json() const;
};

// The sizes of a trace (bytes: 0).
TraceSize size_of(const formats::TraceSource& trace);
TraceSize size_of(const formats::Trace& trace);

// A source (formats::open_trace) is read op by op: the full replay streams it, and only the cut
// (the ops from the start point to the divergent op) is held, so a trace of 10^5 ops reduces in
// the memory of a replay, not of the trace.
ReduceResult reduce_trace(formats::TraceSource& trace, Backend& backend, const ReduceOptions& options = {});
ReduceResult reduce_trace(const formats::Trace& trace, Backend& backend, const ReduceOptions& options = {});

}  // namespace ssm::replay
