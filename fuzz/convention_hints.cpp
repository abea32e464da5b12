// Conventions an implementation does not declare, confirmed by a rerun (see convention_hints.h).
#include "fuzz/convention_hints.h"

#include <fmt/core.h>

#include "core/numerics_alternatives.h"

namespace ssm::fuzz {

namespace {

// How a plug-in and a Python class declare the convention that `flag` ("--gates torch") names.
std::string declaration(const std::string& flag) {
  if (flag == "--gates torch") return "SSMP_GATES_TORCH; a Python class: gates = \"torch\"";
  if (flag == "--f16-store inf") return "SSMP_F16_STORE_INF; a Python class: f16_store = \"inf\"";
  if (flag == "--f16-rows carried") return "SSMP_F16_ROWS_CARRIED; a Python class: f16_rows = \"carried\"";
  return "its declaration says otherwise: remove it";  // the contract's value: a declaration too many
}

}  // namespace

std::vector<std::string> convention_hints(const CaseConfig& config, const std::vector<Op>& script,
                                          const BackendFactory& model, const BackendFactory& sut,
                                          const cmp::Tolerances& tol, cmp::Strictness strictness,
                                          const Invariant& invariant, bool pause_async, const std::string& sut_name) {
  std::vector<std::string> hints;
  for (const NumericsAlternative& alt : numerics_alternatives(config.numerics, config.h_mode)) {
    CaseConfig c = config;
    c.numerics = alt.numerics;
    bool passes = false;
    try {
      passes = check_script(c, script, model, sut, tol, strictness, "", invariant, pause_async).pass;
    } catch (const std::exception&) {
      passes = false;  // the case cannot be set up that way: nothing confirmed
    }
    if (passes)
      hints.push_back(
          fmt::format("the case passes when the reference computes {}: {} computes it without declaring it "
                      "({}; {})?",
                      alt.what, sut_name, declaration(alt.flag), alt.flag));
  }
  return hints;
}

}  // namespace ssm::fuzz
