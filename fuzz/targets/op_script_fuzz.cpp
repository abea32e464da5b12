// libFuzzer target: the op-script parser (core/op.cpp), built by scripts/fuzz.sh with clang and
// ASan/UBSan. Every input must either parse, and then print back to a script that parses to the
// same ops, or be refused with std::invalid_argument; any other exception, a crash or a sanitizer
// report is a finding. Inputs that ever found one are kept in corpus/op_script/ as regressions.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/op.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<ssm::Op> script;
  try {
    script = ssm::parse_script(text);
  } catch (const std::invalid_argument&) {
    return 0;  // a clear refusal is the contract for bad input
  }
  const std::vector<ssm::Op> again = ssm::parse_script(ssm::to_string(script));  // must not throw
  if (!(again == script)) __builtin_trap();  // the printable form must parse back to the same ops
  return 0;
}
