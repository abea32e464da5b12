// One campaign run as several processes (`fuzz --jobs N`: each process the shard it was given,
// writing a CaseRecord per case) merged into the result of the campaign run in one process:
// the same cases, ops, coverage and verdict. A process stops at its own first failing case, so the
// records show the first failing case c of the whole campaign (the lowest index); the merge
// counts the cases before it from their records and runs case c once more here, as run_campaign
// would (its shrinking, dumps and rerun line), so a failure is reported exactly as unsharded.
#pragma once
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/case_record.h"

namespace ssm::fuzz {

// Process j of `jobs`: the campaign's shard I/M split further, shard I + j*M of jobs*M, without
// shrinking (the merge shrinks the first failure); everything else is `o`'s. `fuzz --jobs` gives
// process j these as flags (cli/fuzz_jobs.cpp).
CampaignOptions job_options(const CampaignOptions& o, int j, int jobs);

// `records`: every record the processes wrote, in any order, for the cases of `o`'s partition
// (o.shard + k * o.shards < o.cases). Throws std::logic_error when a case that must have run has
// no record or has two, or was run in another campaign (its record's campaign_fingerprint is not
// o's: a process's command line lost a flag), and std::runtime_error when the first failing case passes when run again
// (a nondeterministic side: the same seed must give the same verdict). `seconds` is left to the
// caller (the wall time of the whole run).
CampaignResult merge_case_records(const CampaignOptions& o, std::vector<CaseRecord> records,
                                  const BackendFactory& model, const BackendFactory& sut);

}  // namespace ssm::fuzz
