// RapidCheck state-machine campaigns (see campaign.h).
#include "fuzz/campaign.h"

#include "core/keep_freed_memory.h"
#include "core/state_digest.h"

#include <fmt/core.h>
#include <rapidcheck.h>
#include <rapidcheck/state.h>
#include <rapidcheck/detail/Configuration.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <iostream>
#include <sstream>

#include "formats/output_file.h"
#include "fuzz/bias.h"
#include "fuzz/op_model.h"
#include "compare/likely_cause.h"
#include "fuzz/convention_hints.h"
#include "fuzz/simplify.h"

namespace ssm::fuzz {

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string python_rerun(const std::string& args) {
  const char* cls = std::getenv("SSMCHECK_PYTHON_CLASS");
  if (!cls || !*cls) return fmt::format("ssmcheck.run(\"{}\".split(), YourClass)  (python/ssmcheck)", args);
  std::string python = "python3", path;
  try {
    if (const char* host = std::getenv("SSMCHECK_PYTHON_HOST"); host && *host) {
      const nlohmann::json argv = nlohmann::json::parse(host);
      if (argv.is_array() && !argv.empty() && argv[0].is_string()) python = argv[0].get<std::string>();
    }
    if (const char* p = std::getenv("SSMCHECK_PYTHON_PATH"); p && *p)
      for (const nlohmann::json& d : nlohmann::json::parse(p))
        if (d.is_string()) path += (path.empty() ? "" : ":") + d.get<std::string>();
  } catch (const std::exception&) {  // (set by the bridge; a hand-set value that does not parse is left out)
  }
  return fmt::format("{}{} -c {} {} {}", path.empty() ? "" : "PYTHONPATH=" + shell_quoted(path) + " ",
                     shell_quoted(python),
                     shell_quoted("import sys, ssmcheck; from ssmcheck.host import load_class; "
                                  "c = load_class(sys.argv[1]); sys.exit(ssmcheck.run(sys.argv[2:], c))"),
                     shell_quoted(cls), args);
}

namespace {

// The command that reruns a case: `ssmcheck check ...`, or through the Python bridge.
std::string rerun_line(const CampaignOptions& o, const std::string& case_flags, const std::string& script) {
  const std::string args = fmt::format("check {} --backend {}{} --ops {}", case_flags, o.backend_label,
                                       o.pause_async ? " --pause-async" : "", shell_quoted(script));
  return o.rerun_in_python ? python_rerun(args) : "ssmcheck " + args;
}

// After RapidCheck shrank the script: the configuration too (fuzz/simplify.h), and the result
// brought up to the simplified case (flags, script, report, divergence, rerun line).
void simplify_failure(const CampaignOptions& o, const BackendFactory& model, const BackendFactory& sut,
                      CampaignResult& result) {
  const Simplified s = simplify_case(result.config, parse_script(result.script), model, sut, o.tolerances, o.strictness,
                                     o.sut_invariant, o.pause_async);
  result.recurred = s.recurred;
  if (!s.steps.empty()) {
    result.config = s.config;
    result.case_flags = s.config.flags();
    result.script = to_string(s.script);
    result.script_length = int(s.script.size());
    result.report = s.result.report;
    result.divergence = s.result.divergence;
    result.simplified = s.steps;
    result.rerun = rerun_line(o, result.case_flags, result.script);
  }
  // a convention the implementation computes without declaring it (fuzz/convention_hints.h)
  if (s.recurred)
    result.convention_hints =
        convention_hints(result.config, parse_script(result.script), model, sut, o.tolerances, o.strictness,
                         o.sut_invariant, o.pause_async, result.sut_name.empty() ? o.backend_label : result.sut_name);
  result.report = cmp::outranked_by_reruns(std::move(result.report), result.convention_hints.size());
}

struct RcModel {
  OpModel m;
  int snapshots = 0;
  int max_capacity = 0;
  HMode mode = HMode::f32;
  bool wide_batches = false;  // batches of hundreds of padding rows are affordable (small state)
  const Capabilities* caps = nullptr;  // what the system under test runs (CampaignOptions::caps)
};

// h elements per row of a model, below which a batch of 320 rows costs the reference little
constexpr int64_t kWideBatchMaxElems = 1 << 17;

// What one campaign chunk learns from inside the property (RapidCheck builds the commands).
struct Context {
  int64_t ops = 0;
  int cases = 0;
  int shrinks = 0;
  bool failing = false;  // a failure was seen: later runs are shrink candidates
  Coverage coverage;
  PhaseTimes times;  // every run's, shrinks included
  std::string model_name, sut_name;
  CaseConfig config;
  std::string script, report;
  nlohmann::json divergence;  // the failing op's comparison, as fields
  int length = 0;
};
thread_local Context* g_ctx = nullptr;

// A failing step as fields: its comparison (cmp::StateReport::json, with the likely causes) and
// its text.
nlohmann::json divergence_json(const Lockstep::Step& step) {
  nlohmann::json j = step.json.is_object() ? step.json : nlohmann::json::object();
  j["text"] = step.text;
  return j;
}

using Command = rc::state::Command<RcModel, Lockstep>;

// RapidCheck's inRange narrows its range with the size, which follows the sequence length
// here; op arguments and configurations should not depend on it.
int uniform(int lo, int hi) { return *rc::gen::resize(100, rc::gen::inRange(lo, hi)); }

struct OpCommand : Command {
  Op op;
  // an op outside what the implementation runs is never drawn (the commands below mostly avoid
  // drawing one; this catches the rest, a limit of shape say)
  void checkPreconditions(const RcModel& s) const override {
    RC_PRE(s.m.seqs_ok(op));
    RC_PRE(s.caps->cannot_run(op, "").empty());
  }
  void apply(RcModel& s) const override { s.m.apply(op); }
  void run(const RcModel&, Lockstep& sut) const override {
    const Lockstep::Step step = sut.apply(op);
    ++g_ctx->ops;
    if (!step.pass) fail(sut, step);
  }
  // the last failing run is the minimal one: it runs again after shrinking ends
  static void fail(const Lockstep& sut, const Lockstep::Step& step) {
    g_ctx->failing = true;
    g_ctx->config = sut.config();
    g_ctx->script = to_string(sut.script());
    g_ctx->length = int(sut.script().size());
    g_ctx->report = step.text;
    g_ctx->divergence = divergence_json(step);
    RC_FAIL(step.text);
  }
  void show(std::ostream& os) const override { os << to_string(op); }

 protected:
  // Commands that need a live sequence become an alloc when there is none, so that
  // generation never runs out of valid commands.
  bool pick(const RcModel& s, int& seq) {
    const std::vector<int> live = s.m.live();
    if (live.empty()) {
      op = Op::alloc(0, s.m.next_seq());
      return false;
    }
    seq = *rc::gen::elementOf(live);
    op.seqs = {seq};
    return true;
  }
  // A batch of distinct live sequences in random order with 0..2 padding rows.
  bool pick_batch(const RcModel& s) {
    int seq = 0;
    if (!pick(s, seq)) return false;
    std::vector<int> live = s.m.live();
    std::vector<int> rows;
    const int most = s.caps->max_batch > 0 ? std::min(int(live.size()), s.caps->max_batch) : int(live.size());
    const auto order = *rc::gen::container<std::vector<int>>(
        size_t(uniform(1, most + 1)), rc::gen::resize(100, rc::gen::inRange(0, int(live.size()))));
    for (int i : order)
      if (std::find(rows.begin(), rows.end(), live[size_t(i)]) == rows.end()) rows.push_back(live[size_t(i)]);
    // now and then hundreds of padding rows, so that every kernel's grid exceeds one wave of the
    // GPU and the live rows land in later waves
    // (small presets only: a few hundred rows of a real-shape model cost the CPU reference seconds)
    const int wide = s.wide_batches ? 3 : 0;
    int pads = *rc::gen::weightedElement<int>({{60, 0}, {20, 1}, {10, 2}, {wide, uniform(200, 320)}});
    if (!s.caps->pad_rows) pads = 0;
    if (s.caps->max_batch > 0) pads = std::min(pads, s.caps->max_batch - int(rows.size()));
    for (int p = 0; p < pads; ++p) rows.insert(rows.begin() + uniform(0, int(rows.size()) + 1), kPadRow);
    op.seqs = rows;
    return true;
  }
};

struct AllocCmd : OpCommand {
  explicit AllocCmd(const RcModel& s) {
    op = Op::alloc(*rc::gen::weightedElement<int>({{6, 0}, {1, 1}, {1, 2}, {1, 4}}), s.m.next_seq());
  }
};

struct ReleaseCmd : OpCommand {
  explicit ReleaseCmd(const RcModel& s) {
    int seq;
    if (pick(s, seq)) op.kind = OpKind::release;
  }
};

struct PrefillCmd : OpCommand {
  explicit PrefillCmd(const RcModel& s) {
    int seq;
    if (!pick(s, seq)) return;
    op = Op::prefill(uniform(1, 7), seq);
  }
};

struct DecodeCmd : OpCommand {
  explicit DecodeCmd(const RcModel& s) {
    if (pick_batch(s)) op.kind = OpKind::decode;
  }
};

struct VerifyCmd : OpCommand {
  explicit VerifyCmd(const RcModel& s) {
    if (!pick_batch(s)) return;
    int most = std::max(s.max_capacity, 1) + 1;  // K = capacity + 2 is refused
    if (s.caps->max_verify_k > 0) most = std::min(most, s.caps->max_verify_k);
    const int K = uniform(1, most + 1);  // drawn before the arm
    const VerifyArm arm = *rc::gen::elementOf(s.caps->verify_arms);
    op = Op::verify(K, arm, op.seqs);
  }
};

struct CheckpointCmd : OpCommand {
  explicit CheckpointCmd(const RcModel& s) {
    int seq;
    if (pick(s, seq))
      op.kind = s.caps->checkpoint_async ? *rc::gen::element(OpKind::checkpoint, OpKind::checkpoint_async)
                                         : OpKind::checkpoint;
  }
};

struct CommitCmd : OpCommand {
  explicit CommitCmd(const RcModel& s) {
    int seq;
    if (!pick(s, seq)) return;
    const int k = s.m.meta(seq).last_verify_k > 0 ? s.m.meta(seq).last_verify_k : uniform(1, 4);
    op = Op::commit(uniform(1, k + 1), k, seq);
  }
};

struct RollbackCmd : OpCommand {
  explicit RollbackCmd(const RcModel& s) {
    int seq;
    if (!pick(s, seq)) return;
    const bool and_checkpoint = s.caps->rollback_and_checkpoint_async &&
                                *rc::gen::element(OpKind::rollback, OpKind::rollback_and_checkpoint_async) ==
                                    OpKind::rollback_and_checkpoint_async;
    const int n = uniform(0, std::max(s.m.meta(seq).last_verify_k, 1));
    op = and_checkpoint ? Op::rollback_and_checkpoint_async(n, seq) : Op::rollback(n, seq);
  }
};

struct ToF16Cmd : OpCommand {
  explicit ToF16Cmd(const RcModel& s) {
    int seq;
    if (pick(s, seq)) op.kind = s.caps->runs(OpKind::to_f16) ? OpKind::to_f16 : OpKind::checkpoint;
  }
};

struct SnapshotCmd : OpCommand {
  explicit SnapshotCmd(const RcModel& s) {
    int seq;
    if (!pick(s, seq)) return;
    if (!s.caps->snapshots) {  // an implementation without snapshots gets a checkpoint instead
      op.kind = OpKind::checkpoint;
      return;
    }
    const bool save = *rc::gen::element(OpKind::snapshot_save, OpKind::snapshot_restore) == OpKind::snapshot_save;
    // mostly snapshot 0 so that restores find a save; == snapshots is out of range
    const int index = *rc::gen::weightedElement<int>({{6, 0}, {2, 1}, {1, s.snapshots}});
    op = save ? Op::snapshot_save(index, seq) : Op::snapshot_restore(index, seq);
  }
};

// Ops the contract forbids: both sides must refuse them and change nothing.
struct IllegalCmd : OpCommand {
  explicit IllegalCmd(const RcModel& s) {
    int seq;
    if (!pick(s, seq)) return;
    const int k = s.m.meta(seq).last_verify_k;
    switch (uniform(0, 6)) {
      case 0: op = Op::commit(0, std::max(k, 1), seq); break;                                  // n == 0
      case 1: op = Op::commit(std::max(k, 1) + 1, std::max(k, 1), seq); break;                 // n > k
      case 2: op = Op::commit(1, k + 1, seq); break;                                           // k mismatch
      case 3: op = Op::verify(s.max_capacity + 2, s.caps->verify_arms.front(), {seq}); break;  // capacity
      case 4: op = Op::rollback(std::max(k, 1), seq); break;                                   // past intermediates
      default: op.kind = OpKind::decode; op.seqs = {seq, seq}; break;                     // slot twice
    }
  }
};

// A preset drawn by weight among those whose layers `caps` runs.
std::string draw_preset(const Capabilities& caps) {
  // odd-deep (50 layers) crosses every per-launch limit of cuda/ (96 copies per launch)
  static const std::pair<int, const char*> presets[] = {
      {3, "tiny"}, {3, "odd-a"}, {3, "odd-b"}, {3, "odd-c"}, {3, "odd-d"}, {1, "odd-deep"},
      {2, "mamba-tiny"}, {2, "mamba-odd-a"}, {2, "mamba-odd-b"}, {2, "mamba-odd-c"}, {2, "hybrid-odd"},
      {2, "ple-tiny"}, {2, "ple-odd"}};
  // each preset's model, built once (not once per drawn case)
  static const std::vector<ModelSpec> preset_models = [] {
    std::vector<ModelSpec> v;
    for (const auto& [w, name] : presets) v.push_back(make_preset(name));
    return v;
  }();
  std::vector<std::pair<int, const char*>> drawable;
  int total = 0;
  for (size_t i = 0; i < std::size(presets); ++i) {
    const auto& [w, name] = presets[i];
    if (caps.cannot_run(preset_models[i], "").empty()) {
      drawable.emplace_back(w, name);
      total += w;
    }
  }
  if (drawable.empty())
    throw std::invalid_argument("no preset holds only the layers the backend runs (" + caps.text() + ")");
  int pick = uniform(0, total);
  for (const auto& [w, name] : drawable) {
    if (pick < w) return name;
    pick -= w;
  }
  return drawable.back().second;
}

CaseConfig gen_config(const CampaignOptions& o) {
  CaseConfig c;
  c.preset = o.preset ? *o.preset : draw_preset(o.caps);
  if (o.config_path) c.config_path = *o.config_path;
  c.layers = o.layers;
  c.h_mode = o.h_mode ? *o.h_mode : *rc::gen::elementOf(o.caps.h_modes);
  c.numerics = o.numerics;
  c.slots = uniform(1, o.caps.max_slots > 0 ? std::min(o.caps.max_slots, 4) + 1 : 5);
  c.capacity.clear();
  for (int s = 0; s < c.slots; ++s) c.capacity.push_back(uniform(0, 6));
  // conv capacity is its own axis: equal to the largest h capacity, or drawn independently
  c.conv_capacity = *rc::gen::element(true, false) ? *std::max_element(c.capacity.begin(), c.capacity.end())
                                                    : uniform(0, 6);
  c.snapshots = 2;
  c.gen.seed = uint64_t(uniform(0, 1 << 30));
  // decay swept from g ~ 1 (no forgetting) to strongly decaying
  c.gen.decay = *rc::gen::element(0.5, 0.0, 0.1, 0.9, 1.0);
  // max|h| is about 0.7 x value_scale (docs/fuzzing.md): 60000 takes h close to 65504, 2e5 past
  // it (the converter's overflow to inf, the kernel store's clamp, NaN from inf state)
  c.gen.value_scale = *rc::gen::weightedElement<double>({{3, 1.0}, {3, 30.0}, {3, 2000.0}, {3, 60000.0}, {2, 2e5}});
  c.gen.extreme_gates = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
  return c;
}

class Listener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool accepted) override {
    if (accepted) ++g_ctx->shrinks;
  }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// RapidCheck prints "Using configuration: seed=<random>" to stderr when it first loads its
// configuration: a seed that reproduces nothing here (every case has its own explicit seed).
// Load it once with stderr muted.
void load_rapidcheck_quietly() {
  static const bool loaded = [] {
    std::ostringstream sink;
    std::streambuf* old = std::cerr.rdbuf(sink.rdbuf());
    try {
      rc::detail::configuration();
    } catch (...) {
      std::cerr.rdbuf(old);
      throw;
    }
    std::cerr.rdbuf(old);
    return true;
  }();
  (void)loaded;
}

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

nlohmann::json config_json(const CaseConfig& c) {
  nlohmann::json j = {{"layers", c.layers},
                      {"h_mode", to_string(c.h_mode)},
                      {"slots", c.slots},
                      {"capacity", c.capacity},
                      {"conv_capacity", c.conv_capacity},
                      {"snapshots", c.snapshots},
                      {"seed", c.gen.seed},
                      {"decay", c.gen.decay},
                      {"value_scale", c.gen.value_scale},
                      {"extreme_gates", c.gen.extreme_gates},
                      {"gates", to_string(c.numerics.gates)},
                      {"f16_store", to_string(c.numerics.f16_store)},
                      {"f16_rows", to_string(c.numerics.f16_rows)}};
  if (c.config_path.empty()) j["preset"] = c.preset;
  else j["config"] = c.config_path;
  return j;
}

nlohmann::json CampaignResult::evidence() const {
  if (!failed) return nullptr;
  return {{"case", failed_case},           {"case_flags", case_flags},
          {"config", config_json(config)}, {"script", script},
          {"script_ops", script_length},   {"rerun", rerun},
          {"simplified", simplified},      {"recurred", recurred},
          {"divergence", divergence},      {"convention_hints", convention_hints}};
}

int64_t CampaignResult::sequences() const {
  const auto it = coverage.ops.find("alloc");
  return it == coverage.ops.end() ? 0 : it->second;
}

std::string CampaignResult::case_range() const {
  if (cases == 0) return fmt::format("no case of seed {}", seed);
  if (shards == 1) return fmt::format("case 0..{} of seed {}", cases - 1, seed);
  const int last = shard + (cases - 1) * shards;
  return cases == 1 ? fmt::format("case {} of seed {}, shard {}/{}", shard, seed, shard, shards)
                    : fmt::format("case {}, {}, .. {} of seed {}, shard {}/{}", shard, shard + shards, last, seed, shard,
                                  shards);
}

std::string CampaignResult::summary() const {
  const std::string range = case_range();
  std::string s = fmt::format("{} cases ({}), {} sequences, {} ops in {:.1f} s ({:.0f} ops/s): {}{}\n", cases, range,
                              sequences(), ops, seconds,
                              seconds > 0 ? double(ops) / seconds : 0.0,
                              failed ? "FAILED" : gave_up ? "GAVE UP" : cases == 0 ? "NOTHING RAN" : "passed",
                              stopped_by_duration ? " (stopped by --duration)" : "");
  if (times.total() > 0) s += "  time: " + times.text(model_name, sut_name) + "\n";
  s += coverage.text();
  for (const std::string& b : bias) s += "  BIAS CHECK FAILED: " + b + "\n";
  for (const std::string& b : bias_leaning) s += "  leaning (a note, not a failure): " + b + "\n";
  if (!coverage_missing.empty()) {
    s += "  COVERAGE CHECK FAILED: never reached:";
    for (const auto& m : coverage_missing) s += " [" + m + "]";
    s += "\n";
  }
  if (gave_up) s += "  " + message + "\n";
  if (failed) {
    s += fmt::format("minimal failing case ({} ops):\n  case:   {}\n  script: {}\n  rerun:  {}\n", script_length,
                     case_flags, script, rerun);
    if (!recurred)
      s += fmt::format(
          "  DID NOT RECUR: the minimal case passed {} reruns in this process: a failure that depends on "
          "timing or on state left by earlier cases (a race, a leak between cases); the report below is "
          "the campaign's own failing run, and the rerun line may not reproduce it\n",
          kRecurrenceRuns);
    if (!simplified.empty()) {
      s += "  simplified after shrinking:";
      for (const std::string& x : simplified) s += " [" + x + "]";
      s += "\n";
    }
    s += report;
    for (const std::string& h : convention_hints) s += "  likely cause: " + h + "\n";
    for (const auto& f : files) s += "  wrote " + f + "\n";
  }
  return s;
}

void check_campaign_coverage(const CampaignOptions& o, CampaignResult& result) {
  if (o.require_coverage && !result.failed && !result.gave_up && result.cases > 0 && !o.preset && !o.config_path &&
      !o.h_mode)
    result.coverage_missing = result.coverage.missing(Coverage::required(o.pause_async, o.caps));
  if (!result.failed && !result.gave_up) {
    result.bias = bias_findings(result.coverage.signs);
    result.bias_leaning = bias_findings(result.coverage.signs, /*leaning=*/true);
  }
}

uint64_t campaign_fingerprint(const CampaignOptions& o) {
  StateHasher h;
  h.add(int64_t(o.seed));
  h.add(int64_t(o.max_ops));
  h.add(o.preset.value_or("(drawn)"));
  h.add(o.config_path.value_or("(none)"));
  h.add(int64_t(o.layers));
  h.add(o.h_mode ? std::string(to_string(*o.h_mode)) : std::string("(drawn)"));
  h.add(std::string(to_string(o.numerics.gates)));
  h.add(std::string(to_string(o.numerics.f16_store)));
  h.add(std::string(to_string(o.numerics.f16_rows)));
  h.add(o.caps.text());
  h.add(o.backend_label);
  h.add(o.tolerances.json().dump());
  h.add(int64_t(o.strictness));
  h.add(int64_t(o.pause_async));
  return h.digest();
}

namespace {

// The cases of this shard: shard, shard + shards, ... below o.cases.
int shard_case_count(const CampaignOptions& o) {
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards)
    throw std::invalid_argument(fmt::format("shard {}/{}: expected 0 <= I < N", o.shard, o.shards));
  return o.cases > o.shard ? (o.cases - o.shard + o.shards - 1) / o.shards : 0;
}

// Case c as one RapidCheck run seeded by its index: the cases do not depend on how many ran
// before them, so a count bound or a duration checked between cases is deterministic. What the
// run learns lands in ctx.
rc::detail::TestResult run_case(const CampaignOptions& o, const BackendFactory& model, const BackendFactory& sut, int c,
                                Context& ctx) {
  g_ctx = &ctx;
  rc::detail::TestParams params;
  params.seed = mix(o.seed ^ mix(uint64_t(c)));
  params.maxSuccess = 1;
  params.maxSize = std::max(o.max_ops - 1, 0);
  params.disableShrinking = !o.shrink;
  Listener listener;
  const auto property = [&] {
    const CaseConfig cfg = gen_config(o);
    // A case the implementation cannot set up (create_pool refuses or crashes: a plug-in that
    // runs f32 only, say) fails as itself: its drawn configuration and the implementation's
    // message, with an empty script (its rerun line fails the same way, at set-up).
    std::unique_ptr<Lockstep> made;
    try {
      made = std::make_unique<Lockstep>(cfg, model, sut, o.tolerances, o.strictness, o.sut_invariant, o.pause_async,
                                        /*skip_unchanged=*/true, o.concurrent_sides);
    } catch (const std::exception& e) {
      g_ctx->failing = true;
      g_ctx->config = cfg;
      g_ctx->script.clear();
      g_ctx->length = 0;
      g_ctx->report = std::string("setting up the case failed: ") + e.what();
      g_ctx->divergence = {{"setup_failed", true}, {"text", g_ctx->report}};
      RC_FAIL(g_ctx->report);
    }
    Lockstep& lock = *made;
    struct KeepTimes {  // a failing run leaves by an exception: its time counts too
      Lockstep& lock;
      Context& ctx;
      ~KeepTimes() {
        ctx.times.merge(lock.times());
        ctx.model_name = lock.model_name();
        ctx.sut_name = lock.sut_name();
      }
    } keep_times{lock, ctx};
    const PoolConfig pool = cfg.pool();
    int64_t elems = 0;
    for (const LayerSpec& l : cfg.spec().layers) elems += l.h_elems();
    RcModel initial{OpModel(cfg.spec(), pool),   pool.snapshot_slots,
                    pool.max_capacity(),         pool.h_mode,
                    elems <= kWideBatchMaxElems, &o.caps};
    // one case per RapidCheck run: its length (1..max_ops) is drawn from the case's seed, not
    // from RapidCheck's size schedule, which would tie it to the number of cases run so far
    const auto commands = *rc::gen::resize(
        std::max(o.max_ops - 1, 0),
        rc::state::gen::commands(
            initial, rc::state::gen::execOneOfWithArgs<AllocCmd, ReleaseCmd, PrefillCmd, PrefillCmd, DecodeCmd,
                                                       DecodeCmd, DecodeCmd, CheckpointCmd, CheckpointCmd, VerifyCmd,
                                                       VerifyCmd, VerifyCmd, CommitCmd, CommitCmd, CommitCmd,
                                                       RollbackCmd, RollbackCmd, ToF16Cmd, SnapshotCmd, IllegalCmd>()));
    rc::state::runAll(commands, initial, lock);
    const Lockstep::Step end = lock.finish();  // comparisons a paused async copy deferred
    if (!end.pass) OpCommand::fail(lock, end);
    if (!ctx.failing) {
      ++ctx.cases;
      ctx.coverage.merge(lock.coverage());
    }
  };
  const rc::detail::TestResult r =
      rc::detail::checkProperty(rc::detail::toProperty(property), rc::detail::TestMetadata{}, params, listener);
  g_ctx = nullptr;
  return r;
}

// Case c's counts, coverage and time into the campaign's result.
void add_case(const Context& ctx, CampaignResult& result) {
  result.cases += ctx.cases;
  result.ops += ctx.ops;
  result.case_ops.push_back(ctx.ops);
  result.coverage.merge(ctx.coverage);
  result.times.merge(ctx.times);
  if (!ctx.model_name.empty()) {
    result.model_name = ctx.model_name;
    result.sut_name = ctx.sut_name;
  }
}

// What case c contributed, for CampaignOptions::on_case (`fuzz --case-records`).
CaseRecord case_record(const rc::detail::TestResult& r, const Context& ctx, int c, uint64_t fingerprint) {
  rc::detail::FailureResult failure;
  rc::detail::GaveUpResult gave_up;
  rc::detail::Error error;
  CaseRecord rec;
  rec.index = c;
  rec.status = r.match(failure)                     ? CaseRecord::Status::fail
               : r.match(gave_up) || r.match(error) ? CaseRecord::Status::gave_up
                                                    : CaseRecord::Status::pass;
  rec.campaign = fingerprint;
  rec.ops = ctx.ops;
  rec.coverage = ctx.coverage;
  rec.times = ctx.times;
  rec.model_name = ctx.model_name;
  rec.sut_name = ctx.sut_name;
  return rec;
}

// A failing or given-up case c into the result: the shrunk failure as RapidCheck left it, or why
// RapidCheck gave up. A passing case changes nothing.
void take_verdict(const CampaignOptions& o, const rc::detail::TestResult& r, const Context& ctx, int c,
                  CampaignResult& result) {
  rc::detail::FailureResult failure;
  rc::detail::GaveUpResult gave_up;
  rc::detail::Error error;
  if (r.match(failure)) {
    result.failed = true;
    result.failed_case = c;
    result.cases += 1;
    result.message = failure.description;
    result.config = ctx.config;
    result.case_flags = ctx.config.flags();
    result.script = ctx.script;
    result.script_length = ctx.length;
    result.report = ctx.report;
    result.divergence = ctx.divergence;
    result.rerun = rerun_line(o, result.case_flags, result.script);
  } else if (r.match(gave_up)) {
    result.gave_up = true;
    result.message = gave_up.description;
  } else if (r.match(error)) {
    result.gave_up = true;
    result.message = "RapidCheck error: " + error.description;
  }
}

// One progress line every ten cases, at the last and at a failure, with an ETA from the mean
// time per case so far (the campaign is bounded by its case count).
void report_progress(const CampaignOptions& o, const CampaignResult& result, const Context& ctx, int c, int total,
                     double t) {
  if (!o.progress || !(result.failed || result.cases % 10 == 0 || result.cases == total)) return;
  const std::string eta = result.cases > 0 && result.cases < total && !result.failed
                              ? fmt::format(", ETA {:.0f} s", t / result.cases * (total - result.cases))
                              : "";
  o.progress(fmt::format(
      "{}/{} cases, {} ops, {:.1f} s{}{}", result.cases, total, result.ops, t, eta,
      result.failed ? fmt::format(", case {} failed, shrunk to {} ops ({} shrinks)", c, ctx.length, ctx.shrinks) : ""));
}

// The prefix of a failing case's files in out_dir, named by seed and case, never over earlier
// evidence: a name taken (a campaign run before with the same seed) gets the next suffix -2, -3,
// ...; the .txt, created exclusively, claims it.
std::string claim_case_prefix(const CampaignOptions& o, int failed_case) {
  std::filesystem::create_directories(o.out_dir);
  const std::string base = o.out_dir + "/case-seed" + std::to_string(o.seed) + "-case" + std::to_string(failed_case);
  for (int n = 1;; ++n) {
    const std::string p = n == 1 ? base : base + "-" + std::to_string(n);
    const auto taken = [](const std::string& f) {
      std::error_code ec;
      return std::filesystem::exists(std::filesystem::symlink_status(f, ec));
    };
    if (taken(p + ".model.h5") || taken(p + ".sut.h5")) continue;
    if (std::FILE* claim = std::fopen((p + ".txt").c_str(), "wx")) {  // O_CREAT|O_EXCL
      std::fclose(claim);
      return p;
    }
    if (!taken(p + ".txt")) throw files::OutputError(p + ".txt: cannot be created");
  }
}

// The minimal case replayed once more to write both sides' states at the failing op, and its text
// file (a set-up failure has no state; one that did not recur would dump states that agree).
void write_evidence(const CampaignOptions& o, const BackendFactory& model, const BackendFactory& sut,
                    CampaignResult& result) {
  if (!result.failed || o.out_dir.empty() || result.script_length == 0 || !result.recurred) return;
  const std::string prefix = claim_case_prefix(o, result.failed_case);
  check_script(result.config, parse_script(result.script), model, sut, o.tolerances, o.strictness, prefix,
               o.sut_invariant, o.pause_async);
  result.files = {prefix + ".model.h5", prefix + ".sut.h5", prefix + ".txt"};
  const std::string txt = prefix + ".txt";
  try {
    files::write_output(txt, "# ssmcheck: minimal failing case of the campaign with seed " + std::to_string(o.seed) +
                                 "\n# rerun: " + result.rerun + "\n" + result.report);
  } catch (const files::OutputError& e) {
    throw files::OutputError(txt + ": " + e.what());
  }
}

}  // namespace

CampaignResult run_campaign(const CampaignOptions& o, const BackendFactory& model, const BackendFactory& sut) {
  load_rapidcheck_quietly();
  keep_freed_memory();  // every op copies state: keep freed blocks (also for programs other than the CLI)
  const int total = shard_case_count(o);
  CampaignResult result;
  result.seed = o.seed;
  result.shard = o.shard;
  result.shards = o.shards;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const uint64_t fingerprint = o.on_case ? campaign_fingerprint(o) : 0;  // what each record carries
  for (int c = o.shard; c < o.cases; c += o.shards) {
    if (o.duration_s > 0 && elapsed() >= o.duration_s) {
      result.stopped_by_duration = true;
      break;
    }
    Context ctx;
    const rc::detail::TestResult r = run_case(o, model, sut, c, ctx);
    add_case(ctx, result);
    if (o.on_case) o.on_case(case_record(r, ctx, c, fingerprint));
    take_verdict(o, r, ctx, c, result);
    report_progress(o, result, ctx, c, total, elapsed());
    if (result.failed || result.gave_up) break;
  }
  if (result.failed && o.shrink && result.script_length > 0) simplify_failure(o, model, sut, result);
  result.seconds = elapsed();
  check_campaign_coverage(o, result);
  write_evidence(o, model, sut, result);
  return result;
}

ReplayResult check_script(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& model,
                          const BackendFactory& sut, const cmp::Tolerances& tol, cmp::Strictness strictness,
                          const std::string& dump_prefix, const Invariant& invariant, bool pause_async) {
  ReplayResult r;
  Lockstep lock(config, model, sut, tol, strictness, invariant, pause_async, /*skip_unchanged=*/false);
  auto record = [&r](Lockstep::Step& step, const std::string& label) {
    r.op_labels.push_back(label);
    for (cmp::TensorMargin& m : step.margins) {
      m.where.op_index = int(r.op_labels.size()) - 1;  // the end-of-case comparison gets a column of its own
      r.margins.push_back(std::move(m));
    }
    if (step.pass) return true;
    r.pass = false;
    r.report = step.text;
    r.divergence = divergence_json(step);
    r.failed_op = int(r.op_labels.size()) - 1;
    return false;
  };
  for (const Op& op : script) {
    Lockstep::Step step = lock.apply(op);
    ++r.ops;
    if (!record(step, to_string(op))) break;
  }
  for (const auto& kv : lock.coverage().ops) r.accepted += kv.second;
  if (r.pass) {
    Lockstep::Step end = lock.finish();
    record(end, "(end of the case)");
  }
  if (!dump_prefix.empty()) lock.dump(dump_prefix);
  return r;
}

}  // namespace ssm::fuzz
