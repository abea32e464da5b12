// The catalogue's CPU mutants (fuzz/mutant_catalogue.cpp, backend "reference": the alternate
// path and the shared contract), switched on one at a time in this mutant build: the campaign
// the gate runs (reference vs its alternate path, bitwise, 30-op cases) must catch each one and
// shrink it to a short op script; for one of them both sides' states are written as readable
// HDF5 dumps. The same table on the command line: `ssmcheck mutants --backend reference`.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/mutant.h"
#include "formats/dump.h"
#include "fuzz/alt_reference.h"
#include "fuzz/campaign.h"
#include "fuzz/mutant_catalogue.h"
#include "reference/reference_backend.h"
#include "tests/support/campaign_jobs.h"
#include "tests/support/cpu_campaign.h"

namespace ssm::test {

namespace {
fuzz::CampaignResult campaign(const std::string& mutant, uint64_t seed, const std::string& out_dir) {
  mutant::select(mutant);
  fuzz::CampaignOptions o;  // as the gate's reference campaign (replay/gate.cpp)
  o.seed = seed;
  o.cases = 1000;
  o.max_ops = 30;
  o.strictness = cmp::Strictness::bitwise;
  o.out_dir = out_dir;
  const fuzz::CampaignResult r = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); }, fuzz::alt::make_alt_backend);
  mutant::select("");
  std::printf("mutant %s:\n%s", mutant.c_str(), r.summary().c_str());
  return r;
}

std::vector<std::string> cpu_mutants() {
  std::vector<std::string> v;
  for (const auto& m : fuzz::mutant_catalogue())
    if (m.backend == "reference") v.push_back(m.name);
  return v;
}
}  // namespace

TEST(PropertyMutantCatalogue, HasCpuMutants) { EXPECT_GE(cpu_mutants().size(), 6u); }

class PropertyMutant : public ::testing::TestWithParam<std::string> {};

TEST_P(PropertyMutant, IsCaughtAndShrunk) {
  const fuzz::CampaignResult r = campaign(GetParam(), campaign_seed(1), "");
  ASSERT_TRUE(r.failed) << "mutant " << GetParam() << " survived " << r.cases << " cases";
  EXPECT_LE(r.script_length, 6) << r.script;
}

TEST(PropertyMutantCatalogue, WithoutASelectionThisBuildIsTheShippedCode) {
  // with no mutant selected every site is off: the gate's campaign passes
  mutant::select("");
  const fuzz::CampaignOptions o = bitwise_campaign(1, 30, 30);
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), fuzz::alt::make_alt_backend);
  EXPECT_FALSE(r.failed) << r.summary();
  EXPECT_EQ(r.cases, 30);
}

INSTANTIATE_TEST_SUITE_P(Catalogue, PropertyMutant, ::testing::ValuesIn(cpu_mutants()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(PropertyMutantFiles, MinimalCaseIsWrittenAsReadableDumps) {
  const uint64_t seed = campaign_seed(99);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ssmcheck-mutant-" + std::to_string(seed))).string();
  const fuzz::CampaignResult r = campaign("alt_commit_off_by_one", seed, dir);
  ASSERT_TRUE(r.failed);
  EXPECT_NE(r.report.find("commit"), std::string::npos) << r.report;
  ASSERT_EQ(r.files.size(), 3u);
  const formats::Dump model = formats::read_dump(r.files[0]);
  const formats::Dump sut = formats::read_dump(r.files[1]);
  ASSERT_FALSE(model.sequences.empty());
  EXPECT_EQ(model.provenance.ops, r.script);
  EXPECT_NE(sut.provenance.backend.find("mutant=alt_commit_off_by_one"), std::string::npos) << sut.provenance.backend;
  EXPECT_TRUE(std::filesystem::exists(r.files[2]));
  std::filesystem::remove_all(dir);
}

// A slip in the contract both sides share is invisible to their comparison: the independent
// legality model names it, and the reference's bounds-checked storage reports instead of crashing.
TEST(PropertyMutantContract, SharedContractSlipIsNamedByTheLegalityModel) {
  const fuzz::CampaignResult r = campaign("contract_capacity_off_by_one", campaign_seed(5), "");
  ASSERT_TRUE(r.failed);
  EXPECT_NE(r.report.find("independent legality model"), std::string::npos) << r.report;
  EXPECT_NE(r.report.find("verify"), std::string::npos) << r.script;
}

// fuzz --jobs N with a mutant: the merged campaign fails at the same case, shrinks to the same
// script and reports the same differences as the campaign in one process (the first failing case
// is run once more, with shrinking, after the shards stopped at theirs).
TEST(PropertyMutantCatalogue, JobsFindTheOneProcessFailure) {
  fuzz::CampaignOptions o = bitwise_campaign(3, 200, 30);
  for (const char* m : {"alt_commit_off_by_one", "alt_batch_inputs_shifted"}) {
    mutant::select(m);
    const fuzz::CampaignResult whole = fuzz::run_campaign(o, reference(), fuzz::alt::make_alt_backend);
    const fuzz::CampaignResult merged = run_as_jobs(o, 4, reference(), fuzz::alt::make_alt_backend);
    mutant::select("");
    ASSERT_TRUE(whole.failed) << m;
    EXPECT_TRUE(merged.failed) << m;
    EXPECT_EQ(merged.failed_case, whole.failed_case) << m;
    EXPECT_EQ(merged.script, whole.script) << m;
    EXPECT_EQ(merged.case_flags, whole.case_flags) << m;
    EXPECT_EQ(merged.case_ops, whole.case_ops) << m;
    EXPECT_EQ(summary_without_times(merged), summary_without_times(whole)) << m;
  }
}

}  // namespace ssm::test
