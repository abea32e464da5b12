// Replay of a state trace (formats/trace.h) on a Backend: the trace's ops with the trace's own
// inputs, every recorded state and output compared with compare/ (ref = the trace, got = the
// backend), refusals matched against the ones the trace recorded, and the first divergence
// reported with the last op at which everything still agreed. Counterparts: cli/cmd_replay.cpp,
// replay/gate.h (the CI gate), docs/trace-format.md.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "core/backend.h"
#include "core/capabilities.h"
#include "formats/trace.h"

namespace ssm::replay {

struct ReplayOptions {
  cmp::Tolerances tolerances = cmp::Tolerances::defaults();
  // classes: under the tolerance classes, unless same_build_bitwise applies; bitwise: always.
  cmp::Strictness strictness = cmp::Strictness::classes;
  // A trace whose states come from this very backend and numerics (TraceHeader backend and build
  // equal to Backend::name() and formats::build_id(backend)) must be reproduced bit for bit.
  bool same_build_bitwise = true;
  bool keep_going = false;  // go on past the first divergence (the backend keeps its own state)
  // Replay only ops start+1 .. stop: the pool starts as the states recorded after op `start`
  // (replay/start_point.h, Backend::import_state; -1: a fresh pool) and the replay ends after op
  // `stop` (-1: the last op). The ops outside are skipped and the result says so.
  int start = -1, stop = -1;
  // Keep every compared tensor's margin in ReplayResult::margins (the HTML report's map: a few
  // hundred bytes a tensor, so it grows with the trace). Off, the replay holds the live state and
  // one op only (issue 44 item 5): `replay` keeps them only with --html, the gate never.
  bool margins = true;
};

struct Divergence {
  int op_index = -1;
  std::string op;     // printable op
  std::string what;   // "state", "output", "refusal", "sequence", "backend error"
  int seq = -1, layer = -1;
  std::string tensor;  // the first failing tensor as cmp::Where::tensor ("" for refusal mismatches)
  std::string text;    // the compare/ report, or what differed
  nlohmann::json json;
  std::string headline() const;  // "op 5 'verify 4', seq 0, layer 1, h_intermediate[1] (state)"
};

// An op the backend refused, or the trace recorded as refused.
struct Refusal {
  int op_index = -1;
  std::string op;
  std::string backend_kind;   // "" when the backend accepted the op
  std::string message;        // the backend's StateError text
  std::string recorded_kind;  // "" when the trace recorded no refusal
  bool agree() const { return backend_kind == recorded_kind; }
  std::string text(const std::string& backend) const;
};

struct ReplayResult {
  std::string backend, trace, note;  // note: set for an unfinished capture
  bool bitwise = false;              // judged bit for bit (forced, or the same backend and build)
  std::string judged;                // why the replay was judged as it was, one line
  // Recorded by this backend with other numerics (Backend::numerics_id; an older trace: another
  // executable), so judged under the classes: `ssmcheck approve` re-stamps it when these numerics
  // reproduce it bit for bit.
  bool other_numerics = false;
  int ops_total = 0, ops_run = 0;
  int64_t states_compared = 0, outputs_compared = 0;
  // elements of agreeing states on opposite sides of FP16's overflow threshold that the replaying
  // side took over from the trace (core/overflow_straddle.h)
  int64_t overflow_straddles_adopted = 0;
  std::vector<Divergence> divergences;  // the first one first; more only with keep_going
  std::vector<Refusal> refusals;
  // every state and output tensor compared, in op order (only with ReplayOptions::margins)
  std::vector<cmp::TensorMargin> margins;
  // The last op before the first divergence (or overall) whose recorded evidence (states,
  // outputs, refusals) all agreed; -1 when none.
  int last_agreed_op = -1;
  std::string last_agreed_text;
  // A replay that started from a recorded state (ReplayOptions::start): after which op, and how
  // many ops it did not replay (before the start and after the stop).
  int started_after = -1;
  std::string started_after_text;
  int ops_skipped = 0;
  bool pass() const { return divergences.empty(); }
  // The first divergence is at the expected op, layer and tensor (and seq when given).
  bool matches(const formats::TraceExpectation& x) const;
  std::string text() const;  // terminal report
  nlohmann::json json() const;
};

// Creates a fresh pool on `backend` from the trace's model and pool and replays every op.
// Throws std::invalid_argument when the backend rejects the model or pool.
// The ops are read one at a time (formats::TraceSource::op): a trace opened with formats::open_trace is
// replayed in memory bounded by the live state, whatever its length.
ReplayResult replay_trace(formats::TraceSource& trace, Backend& backend, const ReplayOptions& options = {});
ReplayResult replay_trace(const formats::Trace& trace, Backend& backend, const ReplayOptions& options = {});

// "" when an implementation that runs `caps` (core/capabilities.h) runs the trace: its layers, its
// h mode, its pool's slots and every op the trace's producer accepted (a refused op is refused by
// the contract before it reaches the implementation); else why not, naming the first op outside
// it ("op 7 'snapshot_save 0': plugin:x does not implement it"). Replay and the gate skip such a
// trace on that backend with this reason.
std::string cannot_replay(const formats::TraceSource& trace, const Capabilities& caps, const std::string& name);
std::string cannot_replay(const formats::Trace& trace, const Capabilities& caps, const std::string& name);

}  // namespace ssm::replay
