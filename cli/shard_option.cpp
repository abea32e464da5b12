// --shard I/N (see shard_option.h).
#include "cli/shard_option.h"

#include <stdexcept>

namespace ssm::cli {

std::pair<int, int> parse_shard(const std::string& text) {
  if (text.empty()) return {0, 1};
  const auto bad = [&] { return std::invalid_argument("--shard '" + text + "': expected I/N with 0 <= I < N"); };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw bad();
  int i = 0, n = 0;
  try {
    size_t used_i = 0, used_n = 0;
    i = std::stoi(text.substr(0, slash), &used_i);
    n = std::stoi(text.substr(slash + 1), &used_n);
    if (used_i != slash || used_n != text.size() - slash - 1) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (n < 1 || i < 0 || i >= n) throw bad();
  return {i, n};
}

}  // namespace ssm::cli
