// Seeds and budgets of campaign tests: fixed defaults, overridable from the environment
// (SSMCHECK_SEED, SSMCHECK_CASES, SSMCHECK_MAX_OPS), always printed so a failure replays.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ssm::test {

inline uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

inline uint64_t campaign_seed(uint64_t fallback) {
  const uint64_t seed = env_u64("SSMCHECK_SEED", fallback);
  std::printf("campaign seed=%llu (rerun with SSMCHECK_SEED=%llu)\n", (unsigned long long)seed,
              (unsigned long long)seed);
  return seed;
}

}  // namespace ssm::test
