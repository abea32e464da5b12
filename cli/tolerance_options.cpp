// Shared tolerance flags (see tolerance_options.h).
#include "cli/tolerance_options.h"

#include <fstream>
#include <stdexcept>

namespace ssm::cli {

void ToleranceOptions::add_to(CLI::App* cmd) {
  cmd->add_option("--tolerance", spec, "per-class overrides, e.g. 'fp16-state.max_ulp=4,output.rtol=1e-3'");
  cmd->add_option("--tolerance-file", file, "JSON overrides, e.g. {\"fp16-state\": {\"max_ulp\": 4}}");
}

cmp::Tolerances ToleranceOptions::resolve() const {
  cmp::Tolerances tol = cmp::Tolerances::defaults();
  if (!file.empty()) {
    std::ifstream f(file);
    if (!f) throw std::invalid_argument("--tolerance-file " + file + ": cannot open");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
      throw std::invalid_argument("--tolerance-file " + file + ": not JSON: " + e.what());
    }
    try {
      tol.override_from_json(j);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--tolerance-file " + file + ": " + e.what());
    }
  }
  if (!spec.empty()) {
    try {
      tol.override_from(spec);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--tolerance: " + std::string(e.what()));
    }
  }
  return tol;
}

}  // namespace ssm::cli
