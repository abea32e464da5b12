// --shard I/N (fuzz, gate): a deterministic partition of a campaign's cases for spreading it over
// machines with the schedulers a team already has (a CI matrix, a Slurm array, ctest -j on a
// multi-GPU host): shard I of N runs the cases i % N == I (fuzz::CampaignOptions::shard).
#pragma once
#include <string>
#include <utility>

namespace ssm::cli {

// "2/4" -> {2, 4}; "" -> {0, 1}. Throws std::invalid_argument naming the flag unless 0 <= I < N.
std::pair<int, int> parse_shard(const std::string& text);

inline const char* shard_help() {
  return "I/N: run only the cases i with i % N == I (N shards together run exactly the unsharded cases)";
}

}  // namespace ssm::cli
