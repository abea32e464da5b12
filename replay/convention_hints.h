// Likely causes that only a rerun can confirm: a trace whose producer computed with a convention
// it did not declare (torch gates, FP16 stores that overflow, rows carried in FP32) diverges on
// the first op where the conventions differ, with nothing in the states to point at it. After a
// divergence, replay_trace runs the trace again under each single change of its layers'
// conventions (core/numerics_alternatives.h); one under which it agrees through the divergent op is
// a hint, worded with the flag that reproduces it. Then the slips a rerun on a slipped reference
// confirms (slip_hints, after fuzz/convention_hints.h). docs/trace-format.md, "Conventions";
// docs/fuzzing.md, "Likely causes".
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "formats/trace.h"
#include "replay/replay.h"

namespace ssm::replay {

// `trace` diverged first at op `first_op` when replayed on backends from `make` with `options`,
// judged bit for bit when `bitwise` (ReplayResult::bitwise): each rerun is judged the same way.
// Each hint: "replaying with --gates torch agrees through op 3 'decode' (its first divergence
// without it): the trace's states were computed with torch gates (...), which its layers do not
// declare; declare them (...)". `trace` is changed while it runs and restored before it returns.
std::vector<std::string> convention_hints(formats::TraceSource& trace,
                                          const std::function<std::unique_ptr<Backend>()>& make,
                                          const ReplayOptions& options, int first_op, bool bitwise);
std::vector<std::string> convention_hints(formats::Trace& trace, const std::function<std::unique_ptr<Backend>()>& make,
                                          const ReplayOptions& options, int first_op, bool bitwise);

// The slips that leave nothing in the states to match (fuzz::slip_reruns; convention_hints ends
// with them): the trace replayed through `first_op` on the reference mapping heads tiled (where
// some layer's tiling differs), or writing each padding row's update into pool slot 0 or the slot
// of the live row before it (where an op up to `first_op` has a padding row). Each rerun runs on
// the reference, whatever replayed the trace, and is judged under the tolerance classes (the
// reference need not be the trace's producer; a slip differs far beyond them). Each hint:
// "replaying on the reference that maps heads tiled (...) agrees through op 2 'decode' (its first
// divergence without it): the trace's producer maps its heads tiled instead of grouped (...)?".
std::vector<std::string> slip_hints(formats::TraceSource& trace, const ReplayOptions& options, int first_op);

}  // namespace ssm::replay
