// The CPU campaign's two sides and its usual options, for the tests that run it: the reference
// (model) against the reference driven through its alternate path, compared bitwise.
#pragma once
#include <memory>

#include "fuzz/alt_reference.h"
#include "fuzz/campaign.h"
#include "reference/reference_backend.h"
#include "tests/support/campaign_env.h"

namespace ssm::test {

inline fuzz::BackendFactory reference() {
  return [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
}
inline fuzz::BackendFactory alternate() {
  return [] { return std::unique_ptr<Backend>(new fuzz::alt::AltReferenceBackend()); };
}

// A bitwise campaign of `cases` cases of up to `max_ops` ops, seeded from SSMCHECK_SEED or
// `seed` (printed, campaign_env.h).
inline fuzz::CampaignOptions bitwise_campaign(uint64_t seed, int cases, int max_ops) {
  fuzz::CampaignOptions o;
  o.seed = campaign_seed(seed);
  o.cases = cases;
  o.max_ops = max_ops;
  o.strictness = cmp::Strictness::bitwise;
  return o;
}

}  // namespace ssm::test
