// Trace replay (see replay.h).
#include "replay/replay.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/errors.h"
#include "core/runner.h"
#include "formats/dump.h"
#include "replay/start_point.h"

namespace ssm::replay {

namespace {

// The backend's state cut to what the trace recorded: its layers, and the stage only if recorded.
SequenceState restrict_to(SequenceState got, const formats::TraceState& rec) {
  SequenceState s;
  s.slot = got.slot;
  s.last_verify_k = got.last_verify_k;
  for (int l : rec.layers)
    if (size_t(l) < got.layers.size()) s.layers.push_back(std::move(got.layers[size_t(l)]));
  if (rec.state.h_prefill_stage) s.h_prefill_stage = std::move(got.h_prefill_stage);
  return s;
}

Divergence from_report(const cmp::StateReport& rep, int index, const std::string& op, const std::string& what) {
  Divergence d;
  d.op_index = index;
  d.op = op;
  d.what = what;
  const cmp::Where& w = rep.failures.at(0).where;
  d.seq = w.seq;
  d.layer = w.layer;
  d.tensor = w.tensor;
  d.text = rep.text();
  d.json = rep.json();
  return d;
}

Divergence plain(int index, const std::string& op, const std::string& what, int seq, const std::string& text) {
  Divergence d;
  d.op_index = index;
  d.op = op;
  d.what = what;
  d.seq = seq;
  d.text = text;
  d.json = {{"op_index", index}, {"op", op}, {"what", what}, {"seq", seq}, {"text", text}};
  return d;
}

}  // namespace

std::string Divergence::headline() const {
  cmp::Where w;
  w.op_index = op_index;
  w.op = op;
  w.seq = seq;
  w.layer = layer;
  w.tensor = tensor;
  return w.text() + " (" + what + ")";
}

std::string Refusal::text(const std::string& backend) const {
  std::string s = fmt::format("op {} '{}': ", op_index, op);
  s += backend_kind.empty() ? backend + " accepted it" : fmt::format("{} refused it ({})", backend, message);
  if (recorded_kind.empty()) s += "; the trace recorded no refusal";
  else if (recorded_kind == backend_kind) s += "; the trace recorded the same refusal";
  else s += "; the trace recorded the refusal " + recorded_kind;
  return s;
}

bool ReplayResult::matches(const formats::TraceExpectation& x) const {
  if (divergences.empty()) return false;
  const Divergence& d = divergences.front();
  return d.op_index == x.op && (x.seq < 0 || d.seq == x.seq) && d.layer == x.layer && d.tensor == x.tensor;
}

std::string ReplayResult::text() const {
  std::string s;
  if (!judged.empty()) s += "  judged " + judged + "\n";
  if (started_after >= 0 || ops_skipped > 0)
    s += fmt::format("  started from {}; {} of {} ops not replayed\n",
                     started_after < 0
                         ? std::string("a fresh pool")
                         : fmt::format("the recorded state after op {} '{}'", started_after, started_after_text),
                     ops_skipped, ops_total);
  if (!note.empty()) s += "  note: " + note + "\n";
  for (const Refusal& r : refusals) s += "  refusal: " + r.text(backend) + "\n";
  if (!divergences.empty()) {
    const Divergence& d = divergences.front();
    s += fmt::format("FIRST DIVERGENCE at {}\n  (ref = the trace, got = {})\n", d.headline(), backend);
    s += d.text;
    if (!s.empty() && s.back() != '\n') s += "\n";
    s += last_agreed_op >= 0 ? fmt::format("last op where everything agreed: op {} '{}'\n", last_agreed_op, last_agreed_text)
                             : std::string("last op where everything agreed: none (no recorded state, output or refusal "
                                           "agreed before it)\n");
    for (size_t i = 1; i < divergences.size(); ++i) {
      s += "further divergence at " + divergences[i].headline() + "\n";
      s += divergences[i].text;
      if (s.back() != '\n') s += "\n";
    }
  }
  if (overflow_straddles_adopted > 0)
    s += fmt::format(
        "FP16 overflow threshold: {} element(s) of agreeing states lay on opposite sides of 65520; "
        "{} went on from the trace's values\n",
        overflow_straddles_adopted, backend);
  s += pass() ? fmt::format("result: AGREE: {} ops, {} states and {} outputs compared on {}\n", ops_run,
                            states_compared, outputs_compared, backend)
              : fmt::format("result: DIVERGED: {} divergence(s), {} of {} ops replayed on {}\n", divergences.size(),
                            ops_run, ops_total, backend);
  return s;
}

nlohmann::json ReplayResult::json() const {
  nlohmann::json j = {{"backend", backend},
                      {"bitwise", bitwise},
                      {"judged", judged},
                      {"trace", trace},
                      {"pass", pass()},
                      {"ops_total", ops_total},
                      {"ops_run", ops_run},
                      {"states_compared", states_compared},
                      {"outputs_compared", outputs_compared},
                      {"overflow_straddles_adopted", overflow_straddles_adopted},
                      {"last_agreed_op", last_agreed_op},
                      {"last_agreed_text", last_agreed_text}};
  if (!note.empty()) j["note"] = note;
  j["started_after"] = started_after;  // -1: op 0, a fresh pool
  j["ops_skipped"] = ops_skipped;
  j["refusals"] = nlohmann::json::array();
  for (const Refusal& r : refusals)
    j["refusals"].push_back({{"op_index", r.op_index}, {"op", r.op}, {"backend_kind", r.backend_kind},
                             {"recorded_kind", r.recorded_kind}, {"agree", r.agree()}, {"message", r.message}});
  j["divergences"] = nlohmann::json::array();
  for (const Divergence& d : divergences)
    j["divergences"].push_back({{"op_index", d.op_index}, {"op", d.op}, {"what", d.what}, {"seq", d.seq},
                                {"layer", d.layer}, {"tensor", d.tensor}, {"report", d.json}});
  return j;
}

ReplayResult replay_trace(const formats::Trace& trace, Backend& b, const ReplayOptions& o) {
  formats::MemoryTrace tr(trace);
  return replay_trace(tr, b, o);
}

ReplayResult replay_trace(formats::TraceSource& tr, Backend& b, const ReplayOptions& o) {
  ReplayResult r;
  r.backend = b.name();
  r.trace = tr.source;
  r.note = tr.note;
  r.ops_total = int(tr.size());
  // bits where bits are promised: the same backend and build reproduce their own trace exactly
  ReplayOptions opt = o;
  // the same numerics: the backend's numerics_id (its kernels' digest and device), not the executable
  const std::string here = formats::build_id(b);
  const bool same = tr.header.backend == b.name() && !tr.header.build.empty() && tr.header.build == here;
  if (o.strictness == cmp::Strictness::bitwise) {
    r.judged = "bit for bit (forced)";
  } else if (same && o.same_build_bitwise) {
    opt.strictness = cmp::Strictness::bitwise;
    r.judged = "bit for bit: recorded by this backend and numerics (" + tr.header.build + ")";
  } else {
    r.judged = tr.header.backend == b.name()
                   ? "under the tolerance classes: recorded by " +
                         (tr.header.build.empty() ? std::string("an unrecorded build") : tr.header.build) +
                         ", this is " + here +
                         " (`ssmcheck approve` re-stamps a trace these numerics reproduce; else re-record it)"
                   : "under the tolerance classes: states from '" + tr.header.backend + "', replayed on " + b.name();
  }
  r.other_numerics = tr.header.backend == b.name() && !same;
  r.bitwise = opt.strictness == cmp::Strictness::bitwise;
  const ModelSpec& spec = tr.header.model.spec;
  cmp::LineageTracker lineage(tr.header.pool.h_mode, tr.header.pool.snapshot_slots);
  b.create_pool(tr.header.model, tr.header.pool);
  const StartPoint start = start_point(tr, o.start);  // throws std::invalid_argument: not a start
  const size_t stop = o.stop < 0 ? tr.size() : std::min(tr.size(), size_t(o.stop) + 1);
  r.started_after = start.after_op;
  if (start.after_op >= 0) r.started_after_text = to_string(tr.heads[size_t(start.after_op)].op);
  r.ops_skipped = int(start.after_op + 1 + (tr.size() - std::max(stop, size_t(start.after_op + 1))));
  // The trace's inputs; zeros where it recorded none (padding entries, refused ops). The runner
  // asks for the inputs of the op it runs, the current one of the source.
  Runner runner(b, [&](const InputKey& key, int rows) {
    const int row = key.batch_row;
    const formats::TraceOp& t = tr.op(size_t(key.op_index));
    if (size_t(row) < t.inputs.size() && t.inputs[size_t(row)].rows == rows && !t.inputs[size_t(row)].layers.empty())
      return t.inputs[size_t(row)];
    return StepInputs::zeros(spec, rows);
  });
  // the ops before the start: their lineage (what the trace accepted), and the recorded states
  for (int i = 0; i <= start.after_op; ++i)
    if (!tr.heads[size_t(i)].refused) lineage.apply(tr.heads[size_t(i)].op);
  const std::vector<formats::TraceState>& from =
      start.after_op < 0 ? tr.header.start : tr.op(size_t(start.after_op)).states;
  for (const auto& [seq, slot] : start.slots) {
    for (const formats::TraceState& ts : from)
      if (ts.seq == seq) b.import_state(slot, ts.state);
    runner.adopt(seq, slot);
  }
  int last_ok = start.after_op;  // the recorded states a replay starts from agree by construction
  std::string last_ok_text = r.started_after_text;
  for (size_t i = size_t(start.after_op + 1); i < stop; ++i) {
    const formats::TraceOp& t = tr.op(i);
    const int index = int(i);
    const std::string text = to_string(t.op);
    ++r.ops_run;
    std::vector<Divergence> here;
    bool evidence = false;
    OpResult res;
    bool refused = false;
    std::string kind, message;
    try {
      res = runner.run(t.op, index);
    } catch (const StateError& e) {
      refused = true;
      kind = to_string(e.kind());
      message = e.what();
    } catch (const std::exception& e) {
      here.push_back(plain(index, text, "backend error", -1,
                           fmt::format("{} raised an error that is not a contract refusal: {}\n", b.name(), e.what())));
      refused = true;
    }
    const std::string recorded = t.refused ? to_string(*t.refused) : "";
    if (!kind.empty() || !recorded.empty()) {
      Refusal ref{index, text, kind, message, recorded};
      r.refusals.push_back(ref);
      evidence = true;
      if (!ref.agree()) here.push_back(plain(index, text, "refusal", t.op.seqs.at(0), ref.text(b.name()) + "\n"));
    }
    if (!refused && !t.refused) {
      for (size_t e = 0; e < t.outputs.size() && e < res.outputs.size(); ++e) {
        if (!t.outputs[e] || t.op.seqs[e] == kPadRow) continue;
        evidence = true;
        cmp::Where w;
        w.ref_side = "trace";
        w.got_side = b.name();
        w.op_index = index;
        w.op = text;
        w.seq = t.op.seqs[e];
        w.slot = runner.slot_of(w.seq);
        const cmp::StateReport rep =
            cmp::compare_outputs(spec, *t.outputs[e], res.outputs[e], o.tolerances, w, opt.strictness,
                                lineage.output_lineage(t.op, w.seq));
        r.outputs_compared += rep.tensors;
        if (o.margins) r.margins.insert(r.margins.end(), rep.margins.begin(), rep.margins.end());
        if (!rep.pass()) here.push_back(from_report(rep, index, text, "output"));
      }
      lineage.apply(t.op);
    }
    for (const formats::TraceState& ts : t.states) {
      evidence = true;
      int slot = -1;
      try {
        slot = runner.slot_of(ts.seq);
      } catch (const StateError&) {
        here.push_back(plain(index, text, "sequence", ts.seq,
                             fmt::format("the trace records the state of seq {} after this op, but seq {} is not "
                                         "allocated on {}\n", ts.seq, ts.seq, b.name())));
        continue;
      }
      cmp::Where w;
      w.ref_side = "trace";
      w.got_side = b.name();
      w.op_index = index;
      w.op = text;
      w.seq = ts.seq;
      w.slot = slot;
      SequenceState got;
      try {  // an export that fails is the backend's failure at this op, as an op that fails is
        got = restrict_to(b.export_state(slot), ts);
      } catch (const std::exception& e) {
        here.push_back(
            plain(index, text, "backend error", ts.seq,
                  fmt::format("{} failed to export seq {} (slot {}): {}\n", b.name(), ts.seq, slot, e.what())));
        continue;
      }
      const cmp::StateReport rep =
          cmp::compare_state(ts.state, got, o.tolerances, w, opt.strictness, lineage.of(ts.seq));
      // agreeing states on opposite sides of FP16's overflow threshold: the replaying side goes on
      // from the trace's conversion (core/overflow_straddle.h)
      if (rep.pass() && converts_h_to_f16(tr.header.pool.h_mode)) {
        const std::vector<StateElement> straddles = fp16_overflow_straddles(got, ts.state);
        if (!straddles.empty() && b.adopt_elements(slot, ts.state, straddles))
          r.overflow_straddles_adopted += int64_t(straddles.size());
      }
      r.states_compared += rep.tensors;
      if (o.margins) r.margins.insert(r.margins.end(), rep.margins.begin(), rep.margins.end());
      if (!rep.pass()) here.push_back(from_report(rep, index, text, "state"));
    }
    if (!here.empty()) {
      if (r.divergences.empty()) {
        r.last_agreed_op = last_ok;
        r.last_agreed_text = last_ok_text;
      }
      for (auto& d : here) r.divergences.push_back(std::move(d));
      if (!o.keep_going) break;
    } else if (evidence && r.divergences.empty()) {
      last_ok = index;
      last_ok_text = text;
    }
  }
  if (r.divergences.empty()) {
    r.last_agreed_op = last_ok;
    r.last_agreed_text = last_ok_text;
  }
  return r;
}

std::string cannot_replay(const formats::Trace& trace, const Capabilities& caps, const std::string& name) {
  return cannot_replay(formats::MemoryTrace(trace), caps, name);
}

std::string cannot_replay(const formats::TraceSource& trace, const Capabilities& caps, const std::string& name) {
  const formats::TraceHeader& h = trace.header;
  if (std::string why = caps.cannot_run(h.model.spec, h.pool.h_mode, name); !why.empty()) return why;
  if (std::string why = caps.cannot_run_slots(h.pool.max_slots, name); !why.empty()) return why;
  for (size_t i = 0; i < trace.size(); ++i) {
    const formats::TraceOpHead& t = trace.heads[i];
    if (t.refused) continue;
    if (std::string why = caps.cannot_run(t.op, name); !why.empty())
      return fmt::format("op {} '{}': {}", i, to_string(t.op), why);
  }
  return "";
}

}  // namespace ssm::replay
