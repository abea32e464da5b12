// Runs the same ops on a model backend (the reference) and a system under test, and after
// every op compares what each side refused, the outputs, and the full state of every live
// sequence under the compare/ classes. Writes both sides' states as HDF5 dumps on request.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "core/runner.h"
#include "fixtures/case_config.h"
#include "fuzz/legality.h"

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
  int64_t total = 0;
  void merge(const Coverage& o);
  std::string text() const;
  // The axes of `required` never reached (docs/fuzzing.md, "Coverage").
  std::vector<std::string> missing(const std::vector<std::string>& required) const;
  // What a campaign over drawn configurations must reach: every threshold and clamp of the math of
  // the layer kinds it draws, every configuration axis and every kind of accept; with several
  // kinds also a model that mixes them; paused_async: also a deferred async read.
  // ple: the system under test runs layers hosting a PLE carry (BackendEntry::ple)
  static std::vector<std::string> required(bool paused_async, const std::vector<LayerKind>& kinds, bool ple);
};

class Lockstep {
 public:
  Lockstep(const CaseConfig& config, const BackendFactory& model, const BackendFactory& sut,
           const cmp::Tolerances& tol, cmp::Strictness strictness, Invariant invariant = nullptr,
           bool pause_async = false);

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
  // Writes PREFIX.model.h5 and PREFIX.sut.h5 (every live sequence) and returns their paths.
  std::vector<std::string> dump(const std::string& prefix);

 private:
  CaseConfig config_;
  ModelSpec spec_;
  cmp::Tolerances tol_;
  cmp::Strictness strictness_;
  Invariant invariant_;
  std::unique_ptr<Backend> model_, sut_;
  std::unique_ptr<Runner> model_run_, sut_run_;
  std::vector<Op> script_;
  Coverage coverage_;
  cmp::LineageTracker lineage_;  // which FP32 fields descend from FP16 storage
  LegalityModel legality_;       // what the contract allows, stated independently of core/contract
  bool pause_async_ = false;     // the SUT holds async copies until their reader waits
  void compare_live(const cmp::Where& base, bool final, cmp::StateReport& report,
                    const std::function<void(const std::string&)>& fail);
};

}  // namespace ssm::fuzz
