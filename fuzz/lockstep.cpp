// Lockstep runs of model and system under test (see lockstep.h).
#include "fuzz/lockstep.h"

#include <fmt/core.h>

#include <algorithm>

#include "compare/dump.h"
#include "core/errors.h"

namespace ssm::fuzz {

void Coverage::merge(const Coverage& o) {
  for (const auto& kv : o.ops) ops[kv.first] += kv.second;
  for (const auto& kv : o.refusals) refusals[kv.first] += kv.second;
  for (const auto& kv : o.accepts) accepts[kv.first] += kv.second;
  total += o.total;
}

std::string Coverage::text() const {
  std::string s = "  ops:";
  for (const auto& kv : ops) s += fmt::format(" {}={}", kv.first, kv.second);
  s += "\n  accept positions:";
  for (const auto& kv : accepts) s += fmt::format(" [{}]={}", kv.first, kv.second);
  s += "\n  refused (both sides):";
  for (const auto& kv : refusals) s += fmt::format(" {}={}", kv.first, kv.second);
  return s + "\n";
}

Lockstep::Lockstep(const CaseConfig& config, const BackendFactory& model, const BackendFactory& sut,
                   const cmp::Tolerances& tol, cmp::Strictness strictness, Invariant invariant)
    : config_(config), spec_(config.spec()), tol_(tol), strictness_(strictness), invariant_(std::move(invariant)),
      model_(model()), sut_(sut()), lineage_(config.h_mode, config.snapshots) {
  const Model m = config.model();
  const PoolConfig pool = config.pool();
  model_->create_pool(m, pool);
  sut_->create_pool(m, pool);
  model_run_ = std::make_unique<Runner>(*model_, input_source(spec_, config.gen));
  sut_run_ = std::make_unique<Runner>(*sut_, input_source(spec_, config.gen));
}

namespace {
struct Outcome {
  OpResult result;
  bool refused = false;
  ErrorKind kind = ErrorKind::bad_argument;
  std::string error;
};

Outcome run_one(Runner& r, const Op& op, int index) {
  Outcome o;
  try {
    o.result = r.run(op, index);
  } catch (const StateError& e) {
    o.refused = true;
    o.kind = e.kind();
    o.error = e.what();
  }
  return o;
}
}  // namespace

Lockstep::Step Lockstep::apply(const Op& op) {
  const int index = int(script_.size());
  script_.push_back(op);
  const std::string name = to_string(op);
  const Outcome m = run_one(*model_run_, op, index), s = run_one(*sut_run_, op, index);
  Step step;
  auto fail = [&](const std::string& what) {
    step.pass = false;
    step.text += what;
  };
  if (m.refused != s.refused || (m.refused && m.kind != s.kind)) {
    fail(fmt::format("op {} '{}': {} {}, {} {}\n", index, name, model_->name(),
                     m.refused ? "refused (" + m.error + ")" : "accepted", sut_->name(),
                     s.refused ? "refused (" + s.error + ")" : "accepted"));
  }
  cmp::StateReport report;
  cmp::Where base;
  base.op_index = index;
  base.op = name;
  if (!m.refused && !s.refused) {
    for (size_t i = 0; i < m.result.outputs.size() && i < s.result.outputs.size(); ++i) {
      if (m.result.seqs[i] == kPadRow) continue;  // padding outputs are nobody's
      cmp::Where w = base;
      w.seq = m.result.seqs[i];
      w.slot = model_run_->slot_of(w.seq);
      report.merge(cmp::compare_outputs(spec_, m.result.outputs[i], s.result.outputs[i], tol_, w, strictness_,
                                        lineage_.output_lineage(op, w.seq)));
    }
    lineage_.apply(op);
  }
  const std::vector<int> live = model_run_->live_seqs(), sut_live = sut_run_->live_seqs();
  if (live != sut_live) fail(fmt::format("op {} '{}': the live sequences differ\n", index, name));
  for (int seq : live) {
    if (!std::count(sut_live.begin(), sut_live.end(), seq)) continue;
    const int ms = model_run_->slot_of(seq), ss = sut_run_->slot_of(seq);
    if (ms != ss) {
      fail(fmt::format("op {} '{}': sequence @{} is in slot {} on {} but slot {} on {}\n", index, name, seq,
                       ms, model_->name(), ss, sut_->name()));
      continue;
    }
    cmp::Where w = base;
    w.seq = seq;
    w.slot = ms;
    report.merge(
        cmp::compare_state(model_->export_state(ms), sut_->export_state(ss), tol_, w, strictness_, lineage_.of(seq)));
  }
  if (!report.pass()) fail(report.text());
  if (invariant_) {
    const std::string broken = invariant_(*sut_);
    if (!broken.empty()) fail(fmt::format("op {} '{}': {}: {}\n", index, name, sut_->name(), broken));
  }
  step.json = report.json();
  if (step.pass) {
    ++coverage_.total;
    if (m.refused) {
      ++coverage_.refusals[to_string(m.kind)];
    } else {
      ++coverage_.ops[op_name(op.kind)];
      if (op.kind == OpKind::commit) ++coverage_.accepts[fmt::format("commit {}/{}", op.a, op.b)];
      if (op.kind == OpKind::rollback || op.kind == OpKind::rollback_and_checkpoint_async)
        ++coverage_.accepts[fmt::format("rollback {}", op.a)];
    }
  }
  return step;
}

std::vector<std::string> Lockstep::dump(const std::string& prefix) {
  std::vector<std::string> paths;
  const std::pair<Backend*, Runner*> sides[] = {{model_.get(), model_run_.get()}, {sut_.get(), sut_run_.get()}};
  const char* suffix[] = {".model.h5", ".sut.h5"};
  for (int i = 0; i < 2; ++i) {
    cmp::Dump d;
    d.provenance.backend = sides[i].first->name();
    d.provenance.seed = config_.gen.seed;
    d.provenance.op_index = int(script_.size()) - 1;
    d.provenance.ops = to_string(script_);
    d.provenance.case_name = config_.flags();
    d.spec = spec_;
    d.pool = config_.pool();
    for (int seq : sides[i].second->live_seqs()) {
      cmp::DumpSequence ds;
      ds.seq = seq;
      ds.state = sides[i].first->export_state(sides[i].second->slot_of(seq));
      d.sequences.push_back(std::move(ds));
    }
    const std::string path = prefix + suffix[i];
    cmp::write_dump(path, d);
    paths.push_back(path);
  }
  return paths;
}

}  // namespace ssm::fuzz
