// Systematic bias far inside the tolerance (see bias.h).
#include "fuzz/bias.h"

#include <fmt/core.h>

#include <cmath>

namespace ssm::fuzz {

std::string bias_field(const std::string& tensor) { return tensor.substr(0, tensor.find('[')); }

std::vector<std::string> bias_findings(const std::map<std::string, std::array<int64_t, 2>>& signs) {
  std::vector<std::string> v;
  for (const auto& [field, votes] : signs) {
    const int64_t up = votes[0], down = votes[1], n = up + down;
    if (n < kBiasMinVotes) continue;
    const double z = double(up - down) / std::sqrt(double(n));
    if (std::fabs(z) > kBiasZ)
      v.push_back(fmt::format("{}: {} of {} sequences erred {} (z = {:.1f}, |z| > {:g}: a systematic bias far inside "
                              "the tolerance, such as a rounding that always goes one way)",
                              field, z > 0 ? up : down, n, z > 0 ? "upward" : "downward", z, kBiasZ));
  }
  return v;
}

}  // namespace ssm::fuzz
