// Deliberately broken copies of transitions of the alternate reference path, compiled only into
// this test (tests/property.cmake): the campaign must catch each one, shrink it to a short op
// script, and for one of them write both sides' states as readable HDF5 dumps.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "compare/dump.h"
#include "fuzz/campaign.h"
#include "reference/reference_backend.h"
#include "tests/support/campaign_env.h"

namespace ssm::fuzz {
namespace alt_commit_off_by_one { std::unique_ptr<Backend> make_alt_backend(); }
namespace alt_commit_zero_accepted { std::unique_ptr<Backend> make_alt_backend(); }
namespace alt_batch_inputs_shifted { std::unique_ptr<Backend> make_alt_backend(); }
}  // namespace ssm::fuzz

namespace ssm::test {

namespace {
struct Mutant {
  const char* name;
  std::function<std::unique_ptr<Backend>()> make;
  int max_length;        // the shrunk script must be at most this long
  const char* in_script;  // an op the minimal script must contain
};

fuzz::CampaignResult campaign(const Mutant& m, uint64_t seed, const std::string& out_dir) {
  fuzz::CampaignOptions o;
  o.seed = seed;
  o.cases = 300;
  o.max_ops = 30;
  o.strictness = cmp::Strictness::bitwise;
  o.out_dir = out_dir;
  const fuzz::CampaignResult r = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); }, m.make);
  std::printf("mutant %s:\n%s", m.name, r.summary().c_str());
  return r;
}
}  // namespace

class PropertyMutant : public ::testing::TestWithParam<Mutant> {};

TEST_P(PropertyMutant, IsCaughtAndShrunk) {
  const Mutant& m = GetParam();
  const fuzz::CampaignResult r = campaign(m, campaign_seed(99), "");
  ASSERT_TRUE(r.failed) << "mutant " << m.name << " survived " << r.cases << " cases";
  EXPECT_LE(r.script_length, m.max_length) << r.script;
  EXPECT_NE(r.script.find(m.in_script), std::string::npos) << r.script;
}

INSTANTIATE_TEST_SUITE_P(
    AltPath, PropertyMutant,
    ::testing::Values(
        // bug class 2: commit restores intermediate n instead of n-1 (alloc; verify 3; commit 1 3)
        Mutant{"commit_off_by_one", fuzz::alt_commit_off_by_one::make_alt_backend, 4, "commit"},
        // bug class 13: commit with n == 0 accepted silently (alloc; commit 0 k)
        Mutant{"commit_zero_accepted", fuzz::alt_commit_zero_accepted::make_alt_backend, 3, "commit 0"},
        // bug classes 4/16: a batch row reads its neighbour's inputs (two sequences, one decode)
        Mutant{"batch_inputs_shifted", fuzz::alt_batch_inputs_shifted::make_alt_backend, 4, "decode"}),
    [](const ::testing::TestParamInfo<Mutant>& i) { return std::string(i.param.name); });

TEST(PropertyMutantFiles, MinimalCaseIsWrittenAsReadableDumps) {
  const Mutant m{"commit_off_by_one", fuzz::alt_commit_off_by_one::make_alt_backend, 4, "commit"};
  const uint64_t seed = campaign_seed(99);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ssmcheck-mutant-" + std::to_string(seed))).string();
  const fuzz::CampaignResult r = campaign(m, seed, dir);
  ASSERT_TRUE(r.failed);
  EXPECT_NE(r.report.find("commit"), std::string::npos) << r.report;
  ASSERT_EQ(r.files.size(), 3u);
  const cmp::Dump model = cmp::read_dump(r.files[0]);
  const cmp::Dump sut = cmp::read_dump(r.files[1]);
  ASSERT_FALSE(model.sequences.empty());
  EXPECT_EQ(model.provenance.ops, r.script);
  EXPECT_NE(sut.provenance.backend.find("mutant=commit_off_by_one"), std::string::npos) << sut.provenance.backend;
  EXPECT_TRUE(std::filesystem::exists(r.files[2]));
  std::filesystem::remove_all(dir);
}

}  // namespace ssm::test
