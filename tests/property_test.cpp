// The CPU campaign: the reference (model) against the reference driven through its alternate
// path (alt_reference), bitwise, over random op sequences of every kind. Exercises the whole
// campaign machinery (generation, lockstep comparison, coverage) in CI.
#include <gtest/gtest.h>

#include "fuzz/alt_reference.h"
#include "fuzz/campaign.h"
#include "tests/support/campaign_env.h"

namespace ssm::test {

namespace {
fuzz::BackendFactory reference() {
  return [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); };
}
fuzz::BackendFactory alternate() {
  return [] { return std::unique_ptr<Backend>(new fuzz::alt::AltReferenceBackend()); };
}
}  // namespace

TEST(PropertyCpu, ReferenceAgreesWithItsAlternatePathBitwise) {
  fuzz::CampaignOptions o;
  o.seed = campaign_seed(20261129);
  o.cases = int(env_u64("SSMCHECK_CASES", 600));
  o.max_ops = int(env_u64("SSMCHECK_MAX_OPS", 60));
  o.strictness = cmp::Strictness::bitwise;
  o.progress = [](const std::string& line) { std::printf("  %s\n", line.c_str()); };
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), alternate());
  std::printf("%s", r.summary().c_str());
  ASSERT_FALSE(r.failed) << r.summary();
  ASSERT_FALSE(r.gave_up) << r.message;
  EXPECT_EQ(r.cases, o.cases);
  // every op kind ran and was accepted at least once, and illegal ops were refused
  for (OpKind k : all_op_kinds()) EXPECT_GT(r.coverage.ops.count(op_name(k)), 0u) << op_name(k);
  for (const char* kind : {"commit_zero", "commit_n_gt_k", "capacity", "rollback_range", "bad_slot"})
    EXPECT_GT(r.coverage.refusals.count(kind), 0u) << kind;
  EXPECT_GT(r.coverage.accepts.count("commit 1/3"), 0u);
  EXPECT_GT(r.coverage.accepts.count("rollback 0"), 0u);
}

TEST(PropertyCpu, SameSeedGivesTheSameCampaign) {
  fuzz::CampaignOptions o;
  o.seed = campaign_seed(7);
  o.cases = 8;
  o.max_ops = 20;
  o.strictness = cmp::Strictness::bitwise;
  const fuzz::CampaignResult a = fuzz::run_campaign(o, reference(), alternate());
  const fuzz::CampaignResult b = fuzz::run_campaign(o, reference(), alternate());
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.coverage.ops, b.coverage.ops);
  EXPECT_EQ(a.coverage.accepts, b.coverage.accepts);
  o.seed += 1;
  const fuzz::CampaignResult c = fuzz::run_campaign(o, reference(), alternate());
  EXPECT_NE(a.coverage.ops, c.coverage.ops);
}

}  // namespace ssm::test
