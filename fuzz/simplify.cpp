// Shrinking the configuration of a failing case (see simplify.h).
#include "fuzz/simplify.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>

namespace ssm::fuzz {

namespace {

// Where a case fails: the failing op's name and the first failing tensor and layer (or, for a
// refusal or crash mismatch, that there was none). A candidate that fails elsewhere is a
// different bug.
std::string failure_site(const ReplayResult& r) {
  if (r.pass) return "";
  std::string op = r.failed_op >= 0 && size_t(r.failed_op) < r.op_labels.size() ? r.op_labels[size_t(r.failed_op)] : "";
  op = op.substr(0, op.find(' '));
  const nlohmann::json& f =
      r.divergence.is_object() ? r.divergence.value("failures", nlohmann::json::array()) : nlohmann::json::array();
  if (!f.is_array() || f.empty()) return op + " (no tensor)";
  const nlohmann::json& first = f.front();
  return fmt::format("{} {} layer {}", op, first.value("tensor", std::string()), first.value("layer", -1));
}

bool mentions(const std::vector<Op>& script, OpKind a, OpKind b) {
  return std::any_of(script.begin(), script.end(), [&](const Op& op) { return op.kind == a || op.kind == b; });
}

}  // namespace

Simplified simplify_case(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& model,
                         const BackendFactory& sut, const cmp::Tolerances& tol, cmp::Strictness strictness,
                         const Invariant& invariant, bool pause_async, int max_runs) {
  Simplified best{config, script, {}, {}};
  int runs = 0;
  auto run = [&](const CaseConfig& c, const std::vector<Op>& s) {
    ++runs;
    try {
      return check_script(c, s, model, sut, tol, strictness, "", invariant, pause_async);
    } catch (const std::exception& e) {  // a configuration the implementation cannot set up
      ReplayResult r;
      r.report = e.what();
      return r;  // (passes: not the same failure)
    }
  };
  do {
    best.result = run(config, script);
    ++best.reruns;
  } while (best.result.pass && best.reruns < kRecurrenceRuns);
  const std::string site = failure_site(best.result);
  best.recurred = !site.empty();
  if (site.empty()) return best;  // it does not fail again: nothing to simplify against
  // Keeps the candidate when it fails at the same site.
  auto attempt = [&](const CaseConfig& c, const std::vector<Op>& s, const std::string& what) {
    if (runs >= max_runs) return false;
    ReplayResult r = run(c, s);
    if (failure_site(r) != site) return false;
    best.config = c;
    best.script = s;
    best.result = std::move(r);
    best.steps.push_back(what);
    return true;
  };
  auto with = [&](const std::function<void(CaseConfig&)>& f) {
    CaseConfig c = best.config;
    f(c);
    return c;
  };
  // the generator's knobs, towards their plainest values
  if (best.config.gen.extreme_gates)
    attempt(with([](CaseConfig& c) { c.gen.extreme_gates = false; }), best.script, "--extreme-gates off");
  if (best.config.gen.decay != 0.5) attempt(with([](CaseConfig& c) { c.gen.decay = 0.5; }), best.script, "--decay 0.5");
  for (double v : {1.0, 30.0, 2000.0, 60000.0})
    if (v < best.config.gen.value_scale &&
        attempt(with([v](CaseConfig& c) { c.gen.value_scale = v; }), best.script, fmt::format("--value-scale {:g}", v)))
      break;
  // the model: fewer layers
  const int layers = int(best.config.spec().layers.size());
  for (int n = 1; n < layers; ++n)
    if (attempt(with([n](CaseConfig& c) { c.layers = n; }), best.script, fmt::format("--layers {}", n))) break;
  // the pool: no snapshot slots when no op uses them, one capacity for every slot, the conv
  // capacity equal to it, fewer slots
  if (best.config.snapshots > 0 && !mentions(best.script, OpKind::snapshot_save, OpKind::snapshot_restore))
    attempt(with([](CaseConfig& c) { c.snapshots = 0; }), best.script, "--snapshots 0");
  if (best.config.capacity.size() > 1) {
    const int most = *std::max_element(best.config.capacity.begin(), best.config.capacity.end());
    attempt(with([most](CaseConfig& c) { c.capacity = {most}; }), best.script, fmt::format("--capacity {}", most));
  }
  if (best.config.capacity.size() == 1 && best.config.conv_capacity != best.config.capacity[0]) {
    const int cap = best.config.capacity[0];
    attempt(with([cap](CaseConfig& c) { c.conv_capacity = cap; }), best.script, fmt::format("--conv-capacity {}", cap));
  }
  for (int n = 1; n < best.config.slots; ++n)
    if (attempt(with([n](CaseConfig& c) {
                  c.slots = n;
                  if (c.capacity.size() > 1) c.capacity.resize(size_t(n));
                }),
                best.script, fmt::format("--slots {}", n)))
      break;
  // the script: the exact verify arm, no padding rows, fewer batch entries, fewer ops
  for (size_t i = 0; i < best.script.size(); ++i) {
    if (best.script[i].kind == OpKind::verify && best.script[i].arm == VerifyArm::wy) {
      std::vector<Op> s = best.script;
      s[i].arm = VerifyArm::exact;
      attempt(best.config, s, fmt::format("op {}: the exact arm", i));
    }
    if (best.script[i].is_batch()) {
      std::vector<Op> s = best.script;
      auto& rows = s[i].seqs;
      rows.erase(std::remove(rows.begin(), rows.end(), kPadRow), rows.end());
      if (!rows.empty() && rows.size() < best.script[i].seqs.size())
        attempt(best.config, s, fmt::format("op {}: no padding rows", i));
      for (size_t e = best.script[i].seqs.size(); e-- > 0 && best.script[i].seqs.size() > 1;) {
        std::vector<Op> t = best.script;
        t[i].seqs.erase(t[i].seqs.begin() + long(e));
        attempt(best.config, t, fmt::format("op {}: entry {} left out", i, e));
      }
    }
  }
  for (size_t i = best.script.size(); i-- > 0;) {
    if (best.script.size() <= 1) break;
    std::vector<Op> s = best.script;
    s.erase(s.begin() + long(i));
    attempt(best.config, s, fmt::format("op {} left out", i));
  }
  return best;
}

}  // namespace ssm::fuzz
