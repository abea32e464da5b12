// The whole content of a file, for the tests that compare files byte for byte or read a report
// the binary wrote (JUnit, logs, traces).
#pragma once
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace ssm::test {

// Throws, naming the path, when the file cannot be opened: an empty string would let a "does not
// contain" check pass on a file that was never written.
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace ssm::test
