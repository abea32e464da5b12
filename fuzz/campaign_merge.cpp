#include "fuzz/campaign_merge.h"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

namespace ssm::fuzz {

CampaignOptions job_options(const CampaignOptions& o, int j, int jobs) {
  CampaignOptions p = o;
  p.shard = o.shard + j * o.shards;
  p.shards = o.shards * jobs;
  p.shrink = false;
  return p;
}

CampaignResult merge_case_records(const CampaignOptions& o, std::vector<CaseRecord> records,
                                  const BackendFactory& model, const BackendFactory& sut) {
  if (o.duration_s > 0) throw std::invalid_argument("a campaign bounded by --duration has no fixed cases to merge");
  std::sort(records.begin(), records.end(), [](const CaseRecord& a, const CaseRecord& b) { return a.index < b.index; });
  for (size_t i = 1; i < records.size(); ++i)
    if (records[i].index == records[i - 1].index)
      throw std::logic_error(fmt::format("case {} has two records", records[i].index));
  const uint64_t campaign = campaign_fingerprint(o);
  CampaignResult passes;  // the cases before the first failing one, from their records
  int first_failing = -1;
  size_t next = 0;  // the next record to take
  for (int c = o.shard; c < o.cases; c += o.shards) {
    while (next < records.size() && records[next].index < c) {
      if (records[next].index % o.shards != o.shard)
        throw std::logic_error(fmt::format("case {} is not in shard {}/{}", records[next].index, o.shard, o.shards));
      ++next;
    }
    if (next == records.size() || records[next].index != c)
      throw std::logic_error(fmt::format("case {} of seed {} has no record", c, o.seed));
    const CaseRecord& r = records[next];
    if (r.campaign != campaign)
      throw std::logic_error(fmt::format(
          "case {} was run in a campaign other than this one (fingerprint {:016x}, this campaign's {:016x}): the "
          "process's command line lost or changed a flag that decides the cases (cli/fuzz_jobs.cpp, fuzz_command_line)",
          c, r.campaign, campaign));
    if (r.status != CaseRecord::Status::pass) {
      first_failing = c;
      break;
    }
    passes.cases += 1;
    passes.ops += r.ops;
    passes.case_ops.push_back(r.ops);
    passes.coverage.merge(r.coverage);
    passes.times.merge(r.times);
    passes.model_name = r.model_name;
    passes.sut_name = r.sut_name;
  }
  CampaignResult result;
  if (first_failing >= 0) {
    // case c alone, as the unsharded loop runs it (shard c of c + 1 runs exactly case c): its
    // failure, shrunk script, report, rerun line and dumps are the result's; the passes go before it
    CampaignOptions one = o;
    one.shard = first_failing;
    one.shards = first_failing + 1;
    one.cases = first_failing + 1;
    one.require_coverage = false;  // checked on the merged result
    one.progress = nullptr;
    one.on_case = nullptr;
    result = run_campaign(one, model, sut);
    if (!result.failed && !result.gave_up)
      throw std::runtime_error(fmt::format(
          "case {} of seed {} failed in its process but passed when run again: a side is not deterministic "
          "(the same seed must give the same verdict); rerun it alone: ssmcheck fuzz --seed {} --cases {} --shard {}/{}",
          first_failing, o.seed, o.seed, first_failing + 1, first_failing, first_failing + 1));
  }
  if (result.model_name.empty()) {
    result.model_name = passes.model_name;
    result.sut_name = passes.sut_name;
  }
  result.seed = o.seed;
  result.shard = o.shard;
  result.shards = o.shards;
  result.cases += passes.cases;
  result.ops += passes.ops;
  result.case_ops.insert(result.case_ops.begin(), passes.case_ops.begin(), passes.case_ops.end());
  result.coverage.merge(passes.coverage);
  result.times.merge(passes.times);
  check_campaign_coverage(o, result);
  return result;
}

}  // namespace ssm::fuzz
