// A campaign run as `fuzz --jobs N` runs it, in one test process: each of the N shards (without
// shrinking) writes its case records, then fuzz/campaign_merge.h merges them.
#pragma once
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/campaign_merge.h"

namespace ssm::test {

inline fuzz::CampaignResult run_as_jobs(const fuzz::CampaignOptions& o, int jobs, const fuzz::BackendFactory& model,
                                        const fuzz::BackendFactory& sut) {
  std::vector<fuzz::CaseRecord> records;
  for (int j = 0; j < jobs; ++j) {
    fuzz::CampaignOptions shard = o;
    shard.shard = o.shard + j * o.shards;
    shard.shards = o.shards * jobs;
    shard.shrink = false;
    shard.out_dir.clear();
    shard.on_case = [&records](const fuzz::CaseRecord& r) { records.push_back(r); };
    fuzz::run_campaign(shard, model, sut);
  }
  return fuzz::merge_case_records(o, records, model, sut);
}

// A summary without its timing (the "in N s (R ops/s)" and the time: line): what must not differ.
inline std::string summary_without_times(const fuzz::CampaignResult& r) {
  std::string s = r.summary(), out;
  for (size_t a = 0, b; a < s.size(); a = b + 1) {
    b = s.find('\n', a);
    if (b == std::string::npos) b = s.size();
    std::string line = s.substr(a, b - a);
    if (line.rfind("  time: ", 0) == 0) continue;
    const size_t in = line.find(" ops in ");
    const size_t colon = line.find("): ", in == std::string::npos ? 0 : in);
    if (in != std::string::npos && colon != std::string::npos) line.erase(in + 4, colon + 1 - (in + 4));
    out += line + "\n";
  }
  return out;
}

}  // namespace ssm::test
