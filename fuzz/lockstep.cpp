// Lockstep runs of model and system under test (see lockstep.h).
#include "fuzz/lockstep.h"

#include <fmt/core.h>

#include <algorithm>
#include <thread>

#include "core/errors.h"
#include "formats/dump.h"
#include "fuzz/bias.h"
#include "reference/branches.h"

namespace ssm::fuzz {

namespace {
// The configuration and accept axes a campaign covers: one name each, used where they are
// counted and in Coverage::required.
constexpr const char* kTiered = "tiered h capacities";
constexpr const char* kConvDiffers = "conv capacity != h capacity";
constexpr const char* kDeep = ">= 49 layers (copy lists span launches)";
constexpr const char* kMixedKinds = "layers of several kinds in one model";
constexpr const char* kExtremeGates = "extreme gates";
constexpr int kWideBatchRows = 200;  // rows of a batch past one wave of every kernel
constexpr const char* kWideBatch = "batch of >= 200 rows";
constexpr const char* kCommitPartial = "commit n < k";
constexpr const char* kCommitFull = "commit n == k";
constexpr const char* kRollbackCheckpoint = "rollback to the checkpoint";
constexpr const char* kRollbackIntermediate = "rollback to an intermediate";
constexpr const char* kAsyncDeferred = "async reads deferred";
constexpr const char* kPleHosted = "layers hosting a PLE carry";
constexpr const char* kPlePartial = "a partial accept restoring a PLE carry";
// elements the model took over from the system under test (core/overflow_straddle.h): counted, not required
constexpr const char* kOverflowStraddleAdopted = "FP16 overflow straddles adopted";
std::string mode_axis(HMode m) { return std::string("h mode ") + to_string(m); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Adds the wall time of its scope to `into`.
class PhaseTimer {
 public:
  explicit PhaseTimer(double& into) : into_(into) {}
  ~PhaseTimer() { into_ += seconds_since(start_); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double& into_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
}  // namespace

void PhaseTimes::merge(const PhaseTimes& o) {
  setup += o.setup;
  model += o.model;
  sut += o.sut;
  export_ += o.export_;
  compare += o.compare;
  checks += o.checks;
  unchanged += o.unchanged;
  compared += o.compared;
  fields_unchanged += o.fields_unchanged;
}

std::string PhaseTimes::text(const std::string& model_name, const std::string& sut_name) const {
  const double all = total();
  std::string s;
  const std::pair<std::string, double> parts[] = {{"setup", setup},      {model_name, model},    {sut_name, sut},
                                                  {"export", export_},   {"compare", compare},   {"checks", checks}};
  for (const auto& p : parts)
    s += fmt::format("{}{} {:.0f}% ({:.2f} s)", s.empty() ? "" : ", ", p.first, all > 0 ? 100 * p.second / all : 0.0,
                     p.second);
  if (unchanged + compared > 0)
    s += fmt::format("; sequence states compared {}, unchanged on both sides {} (fields of compared states unchanged: {})",
                     compared, unchanged, fields_unchanged);
  return s;
}

void Coverage::merge(const Coverage& o) {
  for (const auto& kv : o.axes) axes[kv.first] += kv.second;
  for (const auto& kv : o.ops) ops[kv.first] += kv.second;
  for (const auto& kv : o.refusals) refusals[kv.first] += kv.second;
  for (const auto& kv : o.accepts) accepts[kv.first] += kv.second;
  for (const auto& kv : o.signs)
    for (size_t i = 0; i < 2; ++i) signs[kv.first][i] += kv.second[i];
  total += o.total;
}

std::vector<std::string> Coverage::missing(const std::vector<std::string>& required) const {
  std::vector<std::string> v;
  for (const std::string& r : required)
    if (!axes.count(r) || axes.at(r) == 0) v.push_back(r);
  return v;
}

std::vector<std::string> Coverage::required(bool paused_async, const Capabilities& caps) {
  std::vector<std::string> v;
  const bool any_f16 = caps.runs(HMode::f16) || caps.runs(HMode::f16_pool);
  for (int b = 0; b < ref::kBranches; ++b) {
    const std::optional<LayerKind> k = ref::branch_kind(ref::Branch(b));
    if (k ? caps.runs(*k) : any_f16) v.push_back(ref::branch_name(ref::Branch(b)));  // kind-free: FP16 stores
  }
  if (caps.kinds.size() > 1) v.push_back(kMixedKinds);
  for (HMode m : caps.h_modes) v.push_back(mode_axis(m));
  if (caps.max_slots != 1) v.push_back(kTiered);
  for (const char* a :
       {kConvDiffers, kDeep, kExtremeGates, kCommitPartial, kCommitFull, kRollbackCheckpoint, kRollbackIntermediate})
    v.push_back(a);
  if (caps.pad_rows && (caps.max_batch == 0 || caps.max_batch >= kWideBatchRows)) v.push_back(kWideBatch);
  if (paused_async && caps.async_copies) v.push_back(kAsyncDeferred);
  if (caps.ple) {
    v.push_back(kPleHosted);
    v.push_back(kPlePartial);
  }
  return v;
}

std::string Coverage::text() const {
  std::string s = "  ops:";
  for (const auto& kv : ops) s += fmt::format(" {}={}", kv.first, kv.second);
  s += "\n  accept positions:";
  for (const auto& kv : accepts) s += fmt::format(" [{}]={}", kv.first, kv.second);
  s += "\n  refused (both sides):";
  for (const auto& kv : refusals) s += fmt::format(" {}={}", kv.first, kv.second);
  if (!axes.empty()) {
    s += "\n  thresholds and axes:";
    for (const auto& kv : axes) s += fmt::format(" [{}]={}", kv.first, kv.second);
  }
  return s + "\n";
}

Lockstep::Lockstep(const CaseConfig& config, const BackendFactory& model, const BackendFactory& sut,
                   const cmp::Tolerances& tol, cmp::Strictness strictness, Invariant invariant, bool pause_async,
                   bool skip_unchanged, std::optional<bool> concurrent_sides)
    : config_(config), spec_(config.spec()), tol_(tol), strictness_(strictness), invariant_(std::move(invariant)),
      model_(model()), sut_(sut()), lineage_(config.h_mode, config.snapshots),
      legality_(spec_, config.pool()) {
  const Model m = config.model();
  const PoolConfig pool = config.pool();
  model_->create_pool(m, pool);
  sut_->create_pool(m, pool);
  pause_async_ = pause_async && sut_->pause_async_copies(true);
  skip_unchanged_ = skip_unchanged;
  concurrent_sides_ = concurrent_sides.value_or(default_concurrent_sides());
  // the configuration axes this case covers (docs/fuzzing.md, "Coverage")
  ++coverage_.axes[mode_axis(pool.h_mode)];
  bool tiered = false, conv_differs = false;
  for (int s = 0; s < pool.max_slots; ++s) {
    tiered = tiered || pool.capacity(s) != pool.capacity(0);
    conv_differs = conv_differs || pool.capacity(s) != pool.conv_capacity;
  }
  if (tiered) ++coverage_.axes[kTiered];
  if (conv_differs) ++coverage_.axes[kConvDiffers];
  if (spec_.layers.size() >= 49) ++coverage_.axes[kDeep];
  if (std::any_of(spec_.layers.begin(), spec_.layers.end(),
                  [&](const LayerSpec& l) { return l.kind != spec_.layers[0].kind; }))
    ++coverage_.axes[kMixedKinds];
  if (config.gen.extreme_gates) ++coverage_.axes[kExtremeGates];
  if (spec_.hosts_ple()) ++coverage_.axes[kPleHosted];
  inputs_ = std::make_unique<SharedInputs>(input_source(spec_, config.gen));
  model_run_ = std::make_unique<Runner>(*model_, inputs_->source());
  sut_run_ = std::make_unique<Runner>(*sut_, inputs_->source());
  times_.setup += seconds_since(created_);
}

namespace {
struct Outcome {
  OpResult result;
  bool refused = false;
  ErrorKind kind = ErrorKind::bad_argument;
  std::string error;
  bool crashed = false;  // threw something other than a contract refusal (a bounds check, a CUDA error)
};

Outcome run_one(Runner& r, const Op& op, int index) {
  Outcome o;
  try {
    o.result = r.run(op, index);
  } catch (const StateError& e) {
    o.refused = true;
    o.kind = e.kind();
    o.error = e.what();
  } catch (const std::exception& e) {
    o.crashed = true;
    o.error = e.what();
  }
  return o;
}

std::string describe(const Outcome& o) {
  return o.crashed ? "failed (" + o.error + ")" : o.refused ? "refused (" + o.error + ")" : "accepted";
}
}  // namespace

Lockstep::Step Lockstep::apply(const Op& op) {
  const int index = int(script_.size());
  script_.push_back(op);
  const std::string name = to_string(op);
  const fuzz::Verdict verdict = legality_.judge(op);
  // The two sides run at once: the model on the side worker, the system under test here. The
  // branch counts are the worker thread's (reference/branches.h counts per thread): what the
  // model's computation of this op reaches, nothing else.
  Outcome m, s;
  std::array<int64_t, ref::kBranches> branches{};
  both(
      [&] {
        PhaseTimer t(times_.model);
        ref::take_branch_counts();
        m = run_one(*model_run_, op, index);
        branches = ref::take_branch_counts();
      },
      [&] {
        PhaseTimer t(times_.sut);
        s = run_one(*sut_run_, op, index);
      });
  inputs_->forget();
  Step step;
  auto fail = [&](const std::string& what) {
    step.pass = false;
    step.text += what;
  };
  if (m.crashed || s.crashed || m.refused != s.refused || (m.refused && m.kind != s.kind)) {
    fail(fmt::format("op {} '{}': {} {}, {} {}\n", index, name, model_->name(), describe(m), sut_->name(),
                     describe(s)));
  }
  // The contract both sides share, checked against the independent statement of legality
  // (a model that failed past its contract checks let the op through: that is an acceptance too;
  // run_one never marks an outcome both refused and crashed)
  if (m.refused == verdict.legal || (m.refused && m.kind != verdict.kind))
    fail(fmt::format("op {} '{}': the contract {}, but the independent legality model (fuzz/legality.h) {}\n",
                     index, name,
                     m.refused ? "refused it (" + m.error + ")"
                     : m.crashed ? "let it through (it then failed: " + m.error + ")"
                                 : std::string("accepted it"),
                     verdict.legal ? "says it is legal"
                                   : fmt::format("refuses it as {} ({})", to_string(verdict.kind), verdict.rule)));
  if (verdict.legal && !m.refused && !m.crashed) legality_.apply(op);
  cmp::StateReport report;
  cmp::Where base;
  base.ref_side = model_->name();
  base.got_side = sut_->name();
  base.op_index = index;
  base.op = name;
  if (!m.refused && !s.refused && !m.crashed && !s.crashed) {
    PhaseTimer t(times_.compare);
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
  compare_live(base, false, report, fail);
  if (!report.pass()) fail(report.text());
  if (invariant_) {
    PhaseTimer t(times_.checks);
    const std::string broken = invariant_(*sut_);
    if (!broken.empty()) fail(fmt::format("op {} '{}': {}: {}\n", index, name, sut_->name(), broken));
  }
  step.json = report.json();
  tally_signs(report.margins);
  step.margins = std::move(report.margins);
  if (step.pass) {
    ++coverage_.total;
    for (int b = 0; b < ref::kBranches; ++b)
      if (branches[size_t(b)]) coverage_.axes[ref::branch_name(ref::Branch(b))] += branches[size_t(b)];
    if (!m.refused && op.is_batch() && op.seqs.size() >= size_t(kWideBatchRows)) ++coverage_.axes[kWideBatch];
    const bool is_commit = op.kind == OpKind::commit;
    const bool is_rollback = op.kind == OpKind::rollback || op.kind == OpKind::rollback_and_checkpoint_async;
    const bool partial_commit = is_commit && op.commit_accepted() < op.commit_verify_rows();
    if (!m.refused && is_commit) ++coverage_.axes[partial_commit ? kCommitPartial : kCommitFull];
    if (!m.refused && spec_.hosts_ple() && (partial_commit || (is_rollback && op.rollback_n() > 0)))
      ++coverage_.axes[kPlePartial];
    if (!m.refused && is_rollback) ++coverage_.axes[op.rollback_n() == 0 ? kRollbackCheckpoint : kRollbackIntermediate];
    if (m.refused) {
      ++coverage_.refusals[to_string(m.kind)];
    } else {
      ++coverage_.ops[op_name(op.kind)];
      if (is_commit) ++coverage_.accepts[fmt::format("commit {}/{}", op.commit_accepted(), op.commit_verify_rows())];
      if (is_rollback) ++coverage_.accepts[fmt::format("rollback {}", op.rollback_n())];
    }
  }
  return step;
}

void Lockstep::tally_signs(const std::vector<cmp::TensorMargin>& margins) {
  for (const cmp::TensorMargin& m : margins)
    if (m.where.seq >= 0 && m.above != m.below)
      signed_errors_[{m.where.seq, m.where.layer, bias_field(m.where.tensor)}] += m.above - m.below;
}

bool Lockstep::default_concurrent_sides() { return std::thread::hardware_concurrency() >= 4; }

void Lockstep::both(const std::function<void()>& model_side, const std::function<void()>& sut_side) {
  if (!concurrent_sides_) {
    model_side();
    sut_side();
    return;
  }
  side_.start(model_side);
  std::exception_ptr sut_error;
  try {
    sut_side();
  } catch (...) {
    sut_error = std::current_exception();
  }
  side_.wait();  // always: the model's job may use what the caller's frame holds
  if (sut_error) std::rethrow_exception(sut_error);
}

bool Lockstep::Compared::same(const Compared& o) const {
  const cmp::FieldLineage& a = lineage;
  const cmp::FieldLineage& b = o.lineage;
  return model == o.model && sut == o.sut && slot == o.slot && a.h == b.h && a.h_checkpoint == b.h_checkpoint &&
         a.intermediates == b.intermediates && a.stage == b.stage && a.has_checkpoint == b.has_checkpoint;
}

void Lockstep::compare_live(const cmp::Where& base, bool final, cmp::StateReport& report,
                            const std::function<void(const std::string&)>& fail) {
  const std::vector<int> live = model_run_->live_seqs(), sut_live = sut_run_->live_seqs();
  if (live != sut_live) fail(fmt::format("op {} '{}': the live sequences differ\n", base.op_index, base.op));
  for (auto it = held_.begin(); it != held_.end();)  // the exports of sequences released since
    it = std::count(live.begin(), live.end(), it->first) ? std::next(it) : held_.erase(it);
  for (int seq : live) {
    if (!std::count(sut_live.begin(), sut_live.end(), seq)) continue;
    const int ms = model_run_->slot_of(seq), ss = sut_run_->slot_of(seq);
    if (ms != ss) {
      fail(fmt::format("op {} '{}': sequence @{} is in slot {} on {} but slot {} on {}\n", base.op_index, base.op,
                       seq, ms, model_->name(), ss, sut_->name()));
      continue;
    }
    // With paused async copies, exporting a slot would release its copy before the next reader
    // had the chance to skip its wait: compare it after a later op (or at the end of the case).
    if (!final && pause_async_ && sut_->async_pending(ss)) {
      ++coverage_.axes[kAsyncDeferred];
      continue;
    }
    cmp::Where w = base;
    w.seq = seq;
    w.slot = ms;
    try {
      HeldExport& a = held_[seq].first;
      HeldExport& b = held_[seq].second;
      // At the end of a case every sequence is exported whole and compared field by field, whatever
      // the digests say: digests that hid a change (a plug-in's own, wrong) cannot hide it past the case.
      if (final) {
        a.drop();
        b.drop();
      }
      Compared now;
      now.lineage = lineage_.of(seq);
      now.slot = ms;
      {
        PhaseTimer t(times_.export_);
        both([&] { now.model = a.digest(*model_, ms); }, [&] { now.sut = b.digest(*sut_, ss); });
      }
      const auto it = compared_.find(seq);
      if (skip_unchanged_ && !final && it != compared_.end() && it->second.same(now)) {
        ++times_.unchanged;
        continue;
      }
      const SequenceState* ea = nullptr;
      const SequenceState* eb = nullptr;
      {
        PhaseTimer t(times_.export_);
        both([&] { ea = &a.state(*model_, ms); }, [&] { eb = &b.state(*sut_, ss); });
      }
      PhaseTimer t(times_.compare);
      ++times_.compared;
      cmp::FieldCache* fields = skip_unchanged_ && !final ? &field_cache_[seq] : nullptr;
      const int64_t reused = fields ? fields->reused() : 0;
      if (fields) fields->know(a.known_digests(), b.known_digests());  // the fields are not hashed again
      cmp::StateReport r = cmp::compare_state(*ea, *eb, tol_, w, strictness_, now.lineage, fields);
      if (fields) {
        fields->know({}, {});
        times_.fields_unchanged += fields->reused() - reused;
      }
      if (r.pass()) {
        // agreeing states on opposite sides of FP16's overflow threshold: the model goes on from the
        // system under test's conversion (core/overflow_straddle.h)
        if (converts_h_to_f16(config_.h_mode)) {
          const std::vector<StateElement> straddles = fp16_overflow_straddles(*ea, *eb);
          if (!straddles.empty() && model_->adopt_elements(ms, *eb, straddles))
            coverage_.axes[kOverflowStraddleAdopted] += int64_t(straddles.size());
        }
        compared_[seq] = now;
      } else {
        compared_.erase(seq);
      }
      bound_held_exports(seq);
      report.merge(std::move(r));
    } catch (const std::exception& e) {
      fail(fmt::format("op {} '{}': exporting sequence @{} failed: {}\n", base.op_index, base.op, seq, e.what()));
    }
  }
}

size_t Lockstep::held_export_bytes_ = size_t(4) << 30;

void Lockstep::bound_held_exports(int keep_seq) {
  size_t total = 0;
  for (const auto& [seq, h] : held_) total += h.first.bytes() + h.second.bytes();
  if (total <= held_export_bytes_) return;
  for (auto& [seq, h] : held_)
    if (seq != keep_seq) {
      h.first.drop();
      h.second.drop();
    }
}

Lockstep::Step Lockstep::finish() {
  Step step;
  auto fail = [&](const std::string& what) {
    step.pass = false;
    step.text += what;
  };
  cmp::StateReport report;
  cmp::Where base;
  base.ref_side = model_->name();
  base.got_side = sut_->name();
  base.op_index = int(script_.size()) - 1;
  base.op = script_.empty() ? std::string("(start)") : to_string(script_.back()) + " (end of the case)";
  compare_live(base, true, report, fail);
  if (!report.pass()) fail(report.text());
  step.json = report.json();
  tally_signs(report.margins);
  step.margins = std::move(report.margins);
  if (step.pass)  // the case is over: one vote per sequence, layer and field that erred one way
    for (const auto& [key, net] : signed_errors_)
      if (net != 0) ++coverage_.signs[std::get<2>(key)][net > 0 ? 0 : 1];
  signed_errors_.clear();
  return step;
}

std::vector<std::string> Lockstep::dump(const std::string& prefix) {
  std::vector<std::string> paths;
  const std::pair<Backend*, Runner*> sides[] = {{model_.get(), model_run_.get()}, {sut_.get(), sut_run_.get()}};
  const char* suffix[] = {".model.h5", ".sut.h5"};
  for (int i = 0; i < 2; ++i) {
    formats::Dump d;
    d.provenance.backend = sides[i].first->name();
    d.provenance.seed = config_.gen.seed;
    d.provenance.op_index = int(script_.size()) - 1;
    d.provenance.ops = to_string(script_);
    d.provenance.case_name = config_.flags();
    d.spec = spec_;
    d.pool = config_.pool();
    for (int seq : sides[i].second->live_seqs()) {
      formats::DumpSequence ds;
      ds.seq = seq;
      try {
        ds.state = sides[i].first->export_state(sides[i].second->slot_of(seq));
      } catch (const std::exception&) {
        continue;  // a side that crashed or hung has no state to give: the report says why
      }
      d.sequences.push_back(std::move(ds));
    }
    const std::string path = prefix + suffix[i];
    formats::write_dump(path, d);
    paths.push_back(path);
  }
  return paths;
}

}  // namespace ssm::fuzz
