// Delta debugging of a divergent trace (see reduce.h).
#include "replay/reduce.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <regex>
#include <set>

#include "replay/start_point.h"

namespace ssm::replay {

namespace {

// What a candidate keeps of the cut trace.
struct Keep {
  std::vector<int> layers;  // model layers of the cut trace, ascending
  std::set<int> seqs;       // logical sequences
  std::vector<int> ops;     // op indexes of the cut trace, ascending; the last is the divergent op
};

template <class T>
std::vector<T> pick_layers(const std::vector<T>& v, const std::vector<int>& layers) {
  std::vector<T> out;
  if (v.empty()) return out;
  for (int l : layers) out.push_back(v.at(size_t(l)));
  return out;
}

// A recorded state restricted to the kept layers (renumbered); the stage cut to the new model's.
std::optional<formats::TraceState> cut_state(const formats::TraceState& ts, const std::vector<int>& layers,
                                             const ModelSpec& spec) {
  formats::TraceState r;
  r.seq = ts.seq;
  r.state = ts.state;
  r.state.layers.clear();
  for (size_t j = 0; j < ts.layers.size(); ++j) {
    const auto it = std::find(layers.begin(), layers.end(), ts.layers[j]);
    if (it == layers.end()) continue;
    r.layers.push_back(int(it - layers.begin()));
    r.state.layers.push_back(ts.state.layers[j]);
  }
  if (r.layers.empty()) return std::nullopt;
  if (r.state.h_prefill_stage) {
    const int64_t n = stage_elems(spec);
    Tensor stage = Tensor::zeros(DType::f32, {n});
    for (int64_t i = 0; i < n && i < r.state.h_prefill_stage->size(); ++i)
      stage.f32()[size_t(i)] = r.state.h_prefill_stage->f32()[size_t(i)];
    r.state.h_prefill_stage = std::move(stage);
  }
  return r;
}

formats::Trace build(const formats::Trace& base, const Keep& k) {
  formats::Trace t;
  t.header = base.header;
  t.source = base.source;
  t.header.model.spec.layers = pick_layers(base.header.model.spec.layers, k.layers);
  t.header.model.weights = pick_layers(base.header.model.weights, k.layers);
  const ModelSpec& spec = t.header.model.spec;
  t.header.start.clear();
  for (const formats::TraceState& ts : base.header.start)
    if (k.seqs.count(ts.seq))
      if (auto s = cut_state(ts, k.layers, spec)) t.header.start.push_back(std::move(*s));
  for (int i : k.ops) {
    const formats::TraceOp& o = base.ops[size_t(i)];
    formats::TraceOp n;
    n.op = o.op;
    n.op.seqs.clear();
    n.refused = o.refused;
    bool any = false;
    for (size_t e = 0; e < o.op.seqs.size(); ++e) {
      const int seq = o.op.seqs[e];
      if (seq != kPadRow && !k.seqs.count(seq)) continue;
      any = any || seq != kPadRow;
      n.op.seqs.push_back(seq);
      if (!o.inputs.empty()) {
        StepInputs in = o.inputs[e];
        in.layers = pick_layers(in.layers, k.layers);
        n.inputs.push_back(std::move(in));
      }
      if (!o.outputs.empty()) {
        std::optional<StepOutputs> out = o.outputs[e];
        if (out) {
          out->layers = pick_layers(out->layers, k.layers);
          out->ple = pick_layers(out->ple, k.layers);
          out->ple_condition = pick_layers(out->ple_condition, k.layers);
          out->condition = pick_layers(out->condition, k.layers);
        }
        n.outputs.push_back(std::move(out));
      }
    }
    if (!any) continue;
    for (const formats::TraceState& ts : o.states)
      if (k.seqs.count(ts.seq))
        if (auto s = cut_state(ts, k.layers, spec)) n.states.push_back(std::move(*s));
    t.ops.push_back(std::move(n));
  }
  return t;
}

// What must stay the same for a candidate to count: what diverged, where (the original layer),
// the likely causes (layer numbers aside), and the first failing tensor's mismatch bit for bit.
std::string signature(const Divergence& d, const std::vector<int>& layers) {
  nlohmann::json j;
  j["what"] = d.what;
  j["tensor"] = d.tensor;
  j["seq"] = d.seq;
  j["layer"] = d.layer < 0 || size_t(d.layer) >= layers.size() ? -1 : layers[size_t(d.layer)];
  if (d.json.contains("failures") && !d.json["failures"].empty()) {
    const nlohmann::json& f = d.json["failures"][0];
    for (const char* key : {"failure", "mismatched", "elements", "shape"})
      if (f.contains(key)) j[key] = f[key];
    if (f.contains("worst"))
      for (const auto& w : f["worst"])
        j["worst"].push_back({w.value("index", nlohmann::json()), w.value("ref_bits", ""), w.value("got_bits", "")});
    static const std::regex layer_no("layer \\d+");
    for (const auto& h : d.json.value("hints", nlohmann::json::array()))
      j["hints"].push_back(std::regex_replace(h.get<std::string>(), layer_no, "layer L"));
  } else {
    const size_t at = d.text.find("': ");  // a refusal or a missing sequence: its text without the op's place
    j["text"] = at == std::string::npos ? d.text : d.text.substr(at);
  }
  return j.dump();
}

// ddmin over `items` by complements (remove a chunk; halve the chunks when none can go).
std::vector<int> ddmin(std::vector<int> items, const std::function<bool(const std::vector<int>&)>& still_fails,
                       const std::function<bool()>& out_of_budget) {
  size_t n = 2;
  while (!items.empty() && !out_of_budget()) {
    if (items.size() == 1) {
      if (still_fails({})) items.clear();
      break;
    }
    n = std::min(n, items.size());
    bool removed = false;
    for (size_t c = 0; c < n && !out_of_budget(); ++c) {
      const size_t lo = items.size() * c / n, hi = items.size() * (c + 1) / n;
      std::vector<int> rest(items.begin(), items.begin() + long(lo));
      rest.insert(rest.end(), items.begin() + long(hi), items.end());
      if (still_fails(rest)) {
        items = std::move(rest);
        n = std::max<size_t>(n - 1, 2);
        removed = true;
        break;
      }
    }
    if (!removed) {
      if (n >= items.size()) break;
      n = std::min(items.size(), 2 * n);
    }
  }
  return items;
}

}  // namespace

nlohmann::json TraceSize::json() const { return {{"ops", ops}, {"seqs", seqs}, {"layers", layers}, {"bytes", bytes}}; }

TraceSize size_of(const formats::TraceSource& t) {
  TraceSize s;
  s.ops = int(t.size());
  s.layers = int(t.header.model.spec.layers.size());
  std::set<int> seqs;
  for (const formats::TraceState& ts : t.header.start) seqs.insert(ts.seq);
  for (const formats::TraceOpHead& o : t.heads)
    for (int q : o.op.seqs)
      if (q != kPadRow) seqs.insert(q);
  s.seqs = int(seqs.size());
  return s;
}

TraceSize size_of(const formats::Trace& t) {
  formats::MemoryTrace m(t);
  return size_of(m);
}

ReduceResult reduce_trace(const formats::Trace& trace, Backend& b, const ReduceOptions& options) {
  formats::MemoryTrace m(trace);
  return reduce_trace(m, b, options);
}

ReduceResult reduce_trace(formats::TraceSource& trace, Backend& b, const ReduceOptions& options) {
  ReduceResult r;
  r.before = size_of(trace);
  ReplayOptions ro = options.replay;
  ro.start = -1;
  ro.stop = -1;
  ro.keep_going = false;
  ro.margins = false;  // reduce draws no map: its replays hold the live state and one op
  const ReplayResult full = replay_trace(trace, b, ro);
  if (full.pass()) return r;
  r.diverged = true;
  r.original = full.divergences.front();
  const int D = r.original.op_index;
  // The cut: from the latest start point before D (its states become /start), to D, with D's evidence only.
  std::vector<int> starts{-1};
  for (int s : start_points(trace))
    if (s < D) starts.push_back(s);
  std::reverse(starts.begin(), starts.end());  // the latest first; -1 (op 0) last
  std::vector<int> all_layers;
  for (size_t l = 0; l < trace.header.model.spec.layers.size(); ++l) all_layers.push_back(int(l));
  auto replay_of = [&](const formats::Trace& t) {
    ++r.replays;
    return replay_trace(t, b, ro);
  };
  auto same_place = [&](const Divergence& a, const Divergence& c) {
    return a.what == c.what && a.tensor == c.tensor && a.seq == c.seq && a.layer == c.layer;
  };
  formats::Trace base;
  std::string sig;
  for (int s : starts) {
    formats::Trace cut;
    cut.header = trace.header;
    cut.header.expect.reset();
    cut.source = trace.source;
    const StartPoint sp = start_point(trace, s);
    if (s >= 0) {
      cut.header.start.clear();
      for (const formats::TraceState& ts : trace.op(size_t(s)).states)
        for (const auto& [seq, slot] : sp.slots)
          if (ts.seq == seq) {
            cut.header.start.push_back(ts);
            cut.header.start.back().state.slot = slot;
          }
    }
    for (int i = s + 1; i <= D; ++i) {
      formats::TraceOp o = trace.op(size_t(i));  // the cut alone is held: a source reads it op by op
      if (i < D) {  // evidence before the divergent op agreed: dropping it changes no computation
        o.states.clear();
        for (auto& out : o.outputs) out.reset();
      }
      cut.ops.push_back(std::move(o));
    }
    const ReplayResult rr = replay_of(cut);
    if (!rr.pass() && rr.divergences.front().op_index == int(cut.ops.size()) - 1 &&
        same_place(rr.divergences.front(), r.original)) {
      base = std::move(cut);
      sig = signature(rr.divergences.front(), all_layers);
      r.start_after = s;
      break;
    }
  }
  if (sig.empty()) {  // not even the whole prefix reproduces it (cannot happen for a deterministic backend)
    r.reduced.header = trace.header;
    r.reduced.source = trace.source;
    for (size_t i = 0; i < trace.size(); ++i) r.reduced.ops.push_back(trace.op(i));
    r.reproduced = r.original;
    r.after = r.before;
    return r;
  }
  Keep keep;
  keep.layers = all_layers;
  for (const formats::TraceState& ts : base.header.start) keep.seqs.insert(ts.seq);
  for (const formats::TraceOp& o : base.ops)
    for (int q : o.op.seqs)
      if (q != kPadRow) keep.seqs.insert(q);
  for (size_t i = 0; i < base.ops.size(); ++i) keep.ops.push_back(int(i));
  const int last = keep.ops.back();
  auto fails = [&](const Keep& k) {
    if (k.layers.empty() || k.ops.empty() || k.ops.back() != last) return false;
    formats::Trace t = build(base, k);
    if (t.ops.empty()) return false;
    try {
      const ReplayResult rr = replay_of(t);
      return !rr.pass() && rr.divergences.front().op_index == int(t.ops.size()) - 1 &&
             signature(rr.divergences.front(), k.layers) == sig;
    } catch (const std::exception&) {
      return false;  // a candidate the backend rejects (a state that no longer fits) is not kept
    }
  };
  auto budget = [&] { return r.replays >= options.max_replays; };
  // layers (the divergent one stays), then sequences (the divergent one stays), then ops (the last stays)
  {
    std::vector<int> items;
    for (int l : keep.layers)
      if (l != r.original.layer) items.push_back(l);
    const std::vector<int> kept = ddmin(
        items,
        [&](const std::vector<int>& v) {
          Keep k = keep;
          k.layers = v;
          if (r.original.layer >= 0) k.layers.push_back(r.original.layer);
          std::sort(k.layers.begin(), k.layers.end());
          return fails(k);
        },
        budget);
    keep.layers = kept;
    if (r.original.layer >= 0) keep.layers.push_back(r.original.layer);
    std::sort(keep.layers.begin(), keep.layers.end());
  }
  {
    std::vector<int> items;
    for (int q : keep.seqs)
      if (q != r.original.seq) items.push_back(q);
    const std::vector<int> kept = ddmin(
        items,
        [&](const std::vector<int>& v) {
          Keep k = keep;
          k.seqs = std::set<int>(v.begin(), v.end());
          if (r.original.seq >= 0) k.seqs.insert(r.original.seq);
          return fails(k);
        },
        budget);
    keep.seqs = std::set<int>(kept.begin(), kept.end());
    if (r.original.seq >= 0) keep.seqs.insert(r.original.seq);
  }
  {
    std::vector<int> items(keep.ops.begin(), keep.ops.end() - 1);
    const std::vector<int> kept = ddmin(
        items,
        [&](const std::vector<int>& v) {
          Keep k = keep;
          k.ops = v;
          k.ops.push_back(last);
          return fails(k);
        },
        budget);
    keep.ops = kept;
    keep.ops.push_back(last);
  }
  r.budget_hit = budget();
  r.reduced = build(base, keep);
  const ReplayResult fin = replay_trace(r.reduced, b, ro);
  r.reproduced = fin.divergences.empty() ? Divergence{} : fin.divergences.front();
  formats::TraceExpectation x;  // the reduced trace says where it diverges: `replay` pinpoints it
  x.op = r.reproduced.op_index;
  x.seq = r.reproduced.seq;
  x.layer = r.reproduced.layer;
  x.tensor = r.reproduced.tensor;
  r.reduced.header.expect = x;
  r.reduced.header.description =
      fmt::format("reduced by ssmcheck reduce from {} ({} ops; started after its op {}): diverges at {}", trace.source,
                  trace.size(), r.start_after, r.original.headline());
  r.after = size_of(r.reduced);
  return r;
}

std::string ReduceResult::text() const {
  if (!diverged) return "result: AGREE: nothing to reduce (the trace does not diverge on this backend)\n";
  std::string s = fmt::format("first divergence of the trace: {}\n", original.headline());
  s += start_after >= 0
           ? fmt::format("cut: from the recorded state after op {} (written as the trace's /start)\n", start_after)
           : std::string("cut: from op 0 (no recorded full state before the divergence)\n");
  s += fmt::format("{:<8} {:>8} {:>8} {:>8} {:>12}\n", "", "ops", "seqs", "layers", "bytes");
  s += fmt::format("{:<8} {:>8} {:>8} {:>8} {:>12}\n", "before", before.ops, before.seqs, before.layers, before.bytes);
  s += fmt::format("{:<8} {:>8} {:>8} {:>8} {:>12}\n", "after", after.ops, after.seqs, after.layers, after.bytes);
  s += fmt::format("{} candidate replays{}\n", replays,
                   budget_hit ? " (the --max-replays bound was reached: a smaller trace may exist)" : "");
  s += fmt::format("the reduced trace diverges at {}\n", reproduced.headline());
  return s;
}

nlohmann::json ReduceResult::json() const {
  nlohmann::json j = {{"diverged", diverged},    {"replays", replays},    {"budget_hit", budget_hit},
                      {"before", before.json()}, {"after", after.json()}, {"start_after", start_after}};
  if (diverged) {
    j["original"] = {{"op_index", original.op_index}, {"op", original.op},       {"what", original.what},
                     {"seq", original.seq},           {"layer", original.layer}, {"tensor", original.tensor}};
    j["reduced"] = {{"op_index", reproduced.op_index},
                    {"op", reproduced.op},
                    {"what", reproduced.what},
                    {"seq", reproduced.seq},
                    {"layer", reproduced.layer},
                    {"tensor", reproduced.tensor},
                    {"hints", reproduced.json.value("hints", nlohmann::json::array())}};
  }
  return j;
}

}  // namespace ssm::replay
