// A campaign run as `fuzz --jobs N` runs it, in one test process: each of the N shards (without
// shrinking) writes its case records, then fuzz/campaign_merge.h merges them.
#pragma once
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/campaign_merge.h"
#include "tests/support/summary_text.h"

namespace ssm::test {

inline fuzz::CampaignResult run_as_jobs(const fuzz::CampaignOptions& o, int jobs, const fuzz::BackendFactory& model,
                                        const fuzz::BackendFactory& sut) {
  std::vector<fuzz::CaseRecord> records;
  for (int j = 0; j < jobs; ++j) {
    fuzz::CampaignOptions shard = fuzz::job_options(o, j, jobs);
    shard.out_dir.clear();
    shard.on_case = [&records](const fuzz::CaseRecord& r) { records.push_back(r); };
    fuzz::run_campaign(shard, model, sut);
  }
  return fuzz::merge_case_records(o, records, model, sut);
}

inline std::string summary_without_times(const fuzz::CampaignResult& r) { return text_without_times(r.summary()); }

}  // namespace ssm::test
