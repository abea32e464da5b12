// A campaign summary without what depends on the machine: the "  time: " line and the rate of its
// first line ("... ops in 1.2 s (350 ops/s): passed" -> "... ops: passed"). What `fuzz --jobs`
// and one process must print alike.
#pragma once
#include <string>
#include <vector>

namespace ssm::test {

// The lines of `text` without their newlines (a last line without one included).
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    lines.push_back(text.substr(a, b - a));
  }
  return lines;
}

inline std::string text_without_times(const std::string& text) {
  std::string out;
  for (std::string line : lines_of(text)) {
    if (line.rfind("  time: ", 0) == 0) continue;
    const size_t in = line.find(" ops in ");
    const size_t rate = in == std::string::npos ? std::string::npos : line.find("): ", in);
    if (rate != std::string::npos) line.erase(in + 4, rate + 1 - (in + 4));
    out += line + "\n";
  }
  return out;
}

}  // namespace ssm::test
