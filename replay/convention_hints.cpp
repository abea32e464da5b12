// Conventions a trace's producer did not declare, confirmed by a rerun (see convention_hints.h).
#include "replay/convention_hints.h"

#include <fmt/core.h>

#include "core/numerics_alternatives.h"
#include "fuzz/convention_hints.h"

namespace ssm::replay {

std::vector<std::string> convention_hints(formats::Trace& trace, const std::function<std::unique_ptr<Backend>()>& make,
                                          const ReplayOptions& options, int first_op, bool bitwise) {
  formats::MemoryTrace source(trace);
  return convention_hints(source, make, options, first_op, bitwise);
}

std::vector<std::string> convention_hints(formats::TraceSource& trace,
                                          const std::function<std::unique_ptr<Backend>()>& make,
                                          const ReplayOptions& options, int first_op, bool bitwise) {
  std::vector<std::string> hints;
  std::vector<LayerSpec>& layers = trace.header.model.spec.layers;
  if (layers.empty() || first_op < 0 || size_t(first_op) >= trace.size()) return hints;
  const HMode mode = trace.header.pool.h_mode;
  std::vector<Numerics> declared;
  for (const LayerSpec& l : layers) declared.push_back(l.numerics);
  ReplayOptions o = options;
  o.keep_going = false;
  o.stop = first_op;  // agreeing through first_op is what is asked: the ops after it need not run
  o.margins = false;
  // as the replay that diverged was judged: bit for bit (the same backend and numerics recorded it,
  // or --bitwise) or under the classes
  o.strictness = bitwise ? cmp::Strictness::bitwise : cmp::Strictness::classes;
  o.same_build_bitwise = false;
  const size_t n_alternatives = numerics_alternatives(declared[0], mode).size();
  for (size_t a = 0; a < n_alternatives; ++a) {
    for (size_t l = 0; l < layers.size(); ++l)
      layers[l].numerics = numerics_alternatives(declared[l], mode)[a].numerics;
    const NumericsAlternative alt = numerics_alternatives(declared[0], mode)[a];
    bool agrees = false;
    try {
      const std::unique_ptr<Backend> b = make();
      const ReplayResult r = replay_trace(trace, *b, o);
      agrees = r.pass() || r.divergences.front().op_index > first_op;
    } catch (const std::exception&) {
      agrees = false;  // the backend does not run that convention: nothing confirmed
    }
    if (agrees)
      hints.push_back(fmt::format(
          "replaying with {} agrees through op {} '{}' (its first divergence without it): the trace's states were "
          "computed with {}, which its layers do not declare; declare it (ssmc_set_layer_convention, "
          "TraceWriter.set_layer_conventions) or replay with {}",
          alt.flag, first_op, to_string(trace.heads[size_t(first_op)].op), alt.what, alt.flag));
  }
  for (size_t l = 0; l < layers.size(); ++l) layers[l].numerics = declared[l];
  for (std::string& h : slip_hints(trace, options, first_op)) hints.push_back(std::move(h));
  return hints;
}

std::vector<std::string> slip_hints(formats::TraceSource& trace, const ReplayOptions& options, int first_op) {
  std::vector<std::string> hints;
  if (first_op < 0 || size_t(first_op) >= trace.size()) return hints;
  std::vector<Op> ops;  // the ops through the divergent one: a padding row after it tells nothing
  for (int i = 0; i <= first_op; ++i) ops.push_back(trace.heads[size_t(i)].op);
  ReplayOptions o = options;
  o.keep_going = false;
  o.stop = first_op;
  o.margins = false;
  o.strictness = cmp::Strictness::classes;
  o.same_build_bitwise = false;
  for (const fuzz::SlipRerun& rerun : fuzz::slip_reruns(trace.header.model.spec.layers, ops)) {
    bool agrees = false;
    try {
      const std::unique_ptr<Backend> b = rerun.reference();
      const ReplayResult r = replay_trace(trace, *b, o);
      agrees = r.pass() || r.divergences.front().op_index > first_op;
    } catch (const std::exception&) {
      agrees = false;  // the reference cannot run it so: nothing confirmed
    }
    if (agrees)
      hints.push_back(fmt::format(
          "replaying on the reference that {} agrees through op {} '{}' (its first divergence without it): the "
          "trace's producer {}?",
          rerun.reference_does, first_op, to_string(trace.heads[size_t(first_op)].op), rerun.cause));
  }
  return hints;
}

}  // namespace ssm::replay
