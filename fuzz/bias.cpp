// Systematic bias far inside the tolerance (see bias.h).
#include "fuzz/bias.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace ssm::fuzz {

std::string bias_field(const std::string& tensor) { return tensor.substr(0, tensor.find('[')); }

std::vector<std::string> bias_findings(const std::map<std::string, std::array<int64_t, 2>>& signs, bool leaning) {
  std::vector<std::string> v;
  for (const auto& [field, votes] : signs) {
    const int64_t up = votes[0], down = votes[1], n = up + down;
    if (n < kBiasMinVotes) continue;
    const double z = double(up - down) / std::sqrt(double(n));
    const double majority = double(std::max(up, down)) / double(n);
    if (std::fabs(z) <= kBiasZ || (majority >= kBiasFraction) == leaning) continue;
    v.push_back(fmt::format("{}: {} of {} sequences ({:.0f}%) erred {} (z = {:.1f}{})", field, z > 0 ? up : down, n,
                            100 * majority, z > 0 ? "upward" : "downward", z,
                            leaning ? fmt::format("; below the {:.0f}% that fails", 100 * kBiasFraction)
                                    : ": a systematic bias far inside the tolerance, such as a rounding that always "
                                      "goes one way"));
  }
  return v;
}

}  // namespace ssm::fuzz
