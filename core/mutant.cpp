// The run-time mutant switch of mutant builds (see mutant.h). Compiled only into them.
#include "core/mutant.h"

#include <cstdlib>
#include <cstring>

namespace ssm::mutant {

namespace {
std::string& current() {
  static std::string name = [] {
    const char* env = std::getenv("SSMCHECK_MUTANT");
    return std::string(env ? env : "");
  }();
  return name;
}
}  // namespace

bool active(const char* name) { return !current().empty() && current() == name; }
const std::string& selected() { return current(); }
void select(const std::string& name) { current() = name; }

}  // namespace ssm::mutant
