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

namespace ssm::fuzz {

using BackendFactory = std::function<std::unique_ptr<Backend>()>;
// A check of the system under test after every op (e.g. CUDA guard bands): "" when fine.
using Invariant = std::function<std::string(Backend&)>;

struct Coverage {
  std::map<std::string, int64_t> ops;        // op name -> applied (both sides agreed)
  std::map<std::string, int64_t> refusals;   // error kind -> refused by both sides
  std::map<std::string, int64_t> accepts;    // "commit n/k", "rollback n" -> count
  int64_t total = 0;
  void merge(const Coverage& o);
  std::string text() const;
};

class Lockstep {
 public:
  Lockstep(const CaseConfig& config, const BackendFactory& model, const BackendFactory& sut,
           const cmp::Tolerances& tol, cmp::Strictness strictness, Invariant invariant = nullptr);

  struct Step {
    bool pass = true;
    std::string text;  // what differed; empty when pass
    nlohmann::json json;
  };
  // Applies the op to both sides (op index = ops applied so far) and compares everything.
  Step apply(const Op& op);

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
};

}  // namespace ssm::fuzz
