// A deliberately broken copy of one transition (commit restores intermediate n instead of
// n-1: bug class 2), compiled only into this test: the campaign must catch it and shrink it to
// a short op script, print it, and write both sides' states as readable HDF5 dumps.
#include <gtest/gtest.h>

#include <filesystem>

#include "compare/dump.h"
#include "fuzz/alt_reference.h"
#include "fuzz/campaign.h"
#include "tests/support/campaign_env.h"

namespace ssm::test {

TEST(PropertyMutant, CommitOffByOneIsCaughtAndShrunk) {
  fuzz::CampaignOptions o;
  o.seed = campaign_seed(99);
  o.cases = 200;
  o.max_ops = 30;
  o.strictness = cmp::Strictness::bitwise;
  o.out_dir = (std::filesystem::temp_directory_path() / ("ssmcheck-mutant-" + std::to_string(o.seed))).string();
  const fuzz::CampaignResult r = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); },
      [] { return std::unique_ptr<Backend>(new fuzz::SSM_ALT_NS::AltReferenceBackend()); });
  std::printf("%s", r.summary().c_str());
  ASSERT_TRUE(r.failed) << "the mutant survived " << r.cases << " cases";
  // the minimal case: alloc, a verify of K >= 3, a commit with n < K - 1
  EXPECT_LE(r.script_length, 4) << r.script;
  EXPECT_NE(r.script.find("commit"), std::string::npos) << r.script;
  EXPECT_NE(r.report.find("commit"), std::string::npos) << r.report;
  ASSERT_EQ(r.files.size(), 3u);
  const cmp::Dump model = cmp::read_dump(r.files[0]);
  const cmp::Dump sut = cmp::read_dump(r.files[1]);
  ASSERT_FALSE(model.sequences.empty());
  EXPECT_EQ(model.provenance.ops, r.script);
  EXPECT_NE(sut.provenance.backend.find("mutant"), std::string::npos);
  std::filesystem::remove_all(o.out_dir);
}

}  // namespace ssm::test
