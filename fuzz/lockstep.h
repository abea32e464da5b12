// Runs the same ops on a model backend (the reference) and a system under test, and after
// every op compares what each side refused, the outputs, and the full state of every live
// sequence under the compare/ classes. Writes both sides' states as HDF5 dumps on request.
#pragma once
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "compare/compare.h"
#include "compare/field_cache.h"
#include "core/capabilities.h"
#include "core/runner.h"
#include "fixtures/case_config.h"
#include "fuzz/held_export.h"
#include "fuzz/legality.h"
#include "fuzz/shared_inputs.h"
#include "fuzz/side_worker.h"

namespace ssm::fuzz {

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
// A check of the system under test after every op (e.g. CUDA guard bands): "" when fine.
using Invariant = std::function<std::string(Backend&)>;

struct Coverage {
  std::map<std::string, int64_t> ops;        // op name -> applied (both sides agreed)
  std::map<std::string, int64_t> refusals;   // error kind -> refused by both sides
  std::map<std::string, int64_t> accepts;    // "commit n/k", "rollback n" -> count
  // thresholds, clamps and configuration axes reached (docs/fuzzing.md, "Coverage") -> count
  std::map<std::string, int64_t> axes;
  // field -> {up, down}: sequences whose signed error in the field, summed over their case, went
  // up or down (fuzz/bias.h)
  std::map<std::string, std::array<int64_t, 2>> signs;
  int64_t total = 0;
  void merge(const Coverage& o);
  std::string text() const;
  // The axes of `required` never reached (docs/fuzzing.md, "Coverage").
  std::vector<std::string> missing(const std::vector<std::string>& required) const;
  // What a campaign over drawn configurations must reach: every threshold and clamp of the math of
  // the layer kinds it draws, every configuration axis and every kind of accept; with several
  // kinds also a model that mixes them; paused_async: also a deferred async read. Only what `caps`
  // runs: its layer kinds' branches, its h modes (FP16 branches with an FP16 mode), wide batches
  // with padding rows, a PLE carry, deferred async reads when paused and it has the async path.
  static std::vector<std::string> required(bool paused_async, const Capabilities& caps);
};

// Where a lockstep's wall time went, in seconds (the campaign summary's "time:" line; a guide to
// what to speed up, never part of a verdict).
struct PhaseTimes {
  double setup = 0;    // constructing both backends and their pools
  double model = 0;    // the model backend's ops
  double sut = 0;      // the system under test's ops
  double export_ = 0;  // exporting both sides' states
  double compare = 0;  // comparing outputs and states
  double checks = 0;   // the invariant (CUDA: guard bands)
  int64_t unchanged = 0;  // sequence comparisons skipped: unchanged on both sides (skip_unchanged)
  int64_t compared = 0;   // sequence comparisons made
  int64_t fields_unchanged = 0;  // fields of those whose report was reused (compare/field_cache.h)
  void merge(const PhaseTimes& o);
  double total() const { return setup + model + sut + export_ + compare + checks; }
  // "setup 12% (1.0 s), reference 30% (2.5 s), ..." with the two sides named
  std::string text(const std::string& model_name, const std::string& sut_name) const;
};

class Lockstep {
 public:
  // skip_unchanged: a sequence whose state is unchanged on both sides since its last passing
  // comparison (same digests, core/state_fields.h, and the same FP16 lineage) is not exported or
  // compared again, and in a sequence that is, a field unchanged on both sides since it last passed
  // gets its report again (compare/field_cache.h): those comparisons would give the same reports,
  // so the verdict is the same. At the end of a case (finish) every sequence is exported whole and
  // compared whatever its digests say, so that digests that hid a change (a plug-in's own,
  // ssmp_plugin.field_digests) cannot hide it past the case. Off
  // where every op's every tensor is wanted (check_script: the HTML report's divergence map).
  // concurrent_sides: the model's side of each op and export runs on a second thread while the
  // system under test's runs on this one (default_concurrent_sides when not given). The sides
  // share nothing, so the results are the same either way.
  Lockstep(const CaseConfig& config, const BackendFactory& model, const BackendFactory& sut,
           const cmp::Tolerances& tol, cmp::Strictness strictness, Invariant invariant = nullptr,
           bool pause_async = false, bool skip_unchanged = true, std::optional<bool> concurrent_sides = std::nullopt);
  // On machines with at least 4 hardware threads: with 2 (CI), the reference and its alternate
  // path already fill both, and running them at once measured no faster (Dec 1: 1,351 ops/s
  // either way on the small presets, 44 -> 35 ops/s on qwen3-next-80b); on the H200 machine's
  // 16, CUDA campaigns went from 751 to 900 ops/s on the small presets.
  static bool default_concurrent_sides();
  // The bound on the host bytes of the exports held between ops (held_), 4 GiB; tests set 0 to
  // check that dropping them changes nothing but the time. Not thread-safe: set before campaigns.
  static void set_held_export_bytes(size_t bytes) { held_export_bytes_ = bytes; }

  struct Step {
    bool pass = true;
    std::string text;  // what differed; empty when pass
    nlohmann::json json;
    std::vector<cmp::TensorMargin> margins;  // every tensor compared (the HTML report's map)
  };
  // Applies the op to both sides (op index = ops applied so far) and compares everything.
  Step apply(const Op& op);
  // Compares every live sequence once more, including those whose comparison a paused async
  // copy deferred (call after the last op of a case).
  Step finish();

  const std::vector<Op>& script() const { return script_; }
  const CaseConfig& config() const { return config_; }
  std::string model_name() const { return model_->name(); }
  std::string sut_name() const { return sut_->name(); }
  const Coverage& coverage() const { return coverage_; }
  const PhaseTimes& times() const { return times_; }
  // Writes PREFIX.model.h5 and PREFIX.sut.h5 (every live sequence) and returns their paths.
  std::vector<std::string> dump(const std::string& prefix);

 private:
  // first member: the setup time counts from here, through both backends' construction
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  CaseConfig config_;
  ModelSpec spec_;
  cmp::Tolerances tol_;
  cmp::Strictness strictness_;
  Invariant invariant_;
  std::unique_ptr<Backend> model_, sut_;
  std::unique_ptr<SharedInputs> inputs_;  // generated once for both Runners
  std::unique_ptr<Runner> model_run_, sut_run_;
  std::vector<Op> script_;
  Coverage coverage_;
  // (sequence, layer, field) -> elements above minus below the model so far in this case: each
  // nonzero one a vote of Coverage::signs at finish() (fuzz/bias.h)
  std::map<std::tuple<int, int, std::string>, int64_t> signed_errors_;
  void tally_signs(const std::vector<cmp::TensorMargin>& margins);
  PhaseTimes times_;
  cmp::LineageTracker lineage_;  // which FP32 fields descend from FP16 storage
  LegalityModel legality_;       // what the contract allows, stated independently of core/contract
  bool pause_async_ = false;     // the SUT holds async copies until their reader waits
  bool skip_unchanged_ = true;
  bool concurrent_sides_ = false;
  // per sequence: what its last passing comparison compared (digests of both sides, lineage, slot)
  struct Compared {
    uint64_t model = 0, sut = 0;
    cmp::FieldLineage lineage;
    int slot = -1;
    bool same(const Compared& o) const;
  };
  std::map<int, Compared> compared_;
  std::map<int, cmp::FieldCache> field_cache_;  // per sequence (skip_unchanged)
  // per live sequence: each side's last export, updated field by field (model, system under test);
  // past held_export_bytes_ together, those of the other sequences are dropped after a comparison (a
  // bound on host memory for big states and many sequences; exports are then read whole again)
  std::map<int, std::pair<HeldExport, HeldExport>> held_;
  static size_t held_export_bytes_;  // 4 GiB; set_held_export_bytes (tests)
  void bound_held_exports(int keep_seq);
  SideWorker side_;  // runs the model's side of each op and export beside the system under test's
  // Runs model_side on the side worker and sut_side here, at once; waits for both, then rethrows
  // what either threw (the model's first).
  void both(const std::function<void()>& model_side, const std::function<void()>& sut_side);
  void compare_live(const cmp::Where& base, bool final, cmp::StateReport& report,
                    const std::function<void(const std::string&)>& fail);
};

}  // namespace ssm::fuzz
