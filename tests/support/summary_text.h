// A campaign summary without what depends on the machine: the "  time: " line and the rate of its
// first line ("... ops in 1.2 s (350 ops/s): passed" -> "... ops: passed"). What `fuzz --jobs`
// and one process must print alike.
#pragma once
#include <string>

namespace ssm::test {

inline std::string text_without_times(const std::string& text) {
  std::string out;
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    std::string line = text.substr(a, b - a);
    if (line.rfind("  time: ", 0) == 0) continue;
    const size_t in = line.find(" ops in ");
    const size_t rate = in == std::string::npos ? std::string::npos : line.find("): ", in);
    if (rate != std::string::npos) line.erase(in + 4, rate + 1 - (in + 4));
    out += line + "\n";
  }
  return out;
}

}  // namespace ssm::test
