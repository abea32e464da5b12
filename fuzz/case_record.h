// What one case of a campaign contributes to its result (CampaignOptions::on_case), written as
// one JSON line per case by `fuzz --case-records` in the processes of `fuzz --jobs`, and read back
// by the process that merges them (fuzz/campaign_merge.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/lockstep.h"

namespace ssm::fuzz {

struct CaseRecord {
  enum class Status { pass, fail, gave_up };
  int index = -1;  // the case index (its seed is mix(seed, index))
  uint64_t campaign = 0;  // campaign_fingerprint of the campaign that ran it (fuzz/campaign.h)
  Status status = Status::pass;
  int64_t ops = 0;
  Coverage coverage;  // what the case reached (empty for a case that failed: a campaign merges passes only)
  PhaseTimes times;
  std::string model_name, sut_name;
};

// One line of JSON (no newline) and back. from_json_line throws std::invalid_argument naming
// `where` (file:line) and what is wrong.
std::string to_json_line(const CaseRecord& r);
CaseRecord case_record_from_json_line(const std::string& line, const std::string& where);

// Every record of a file of JSON lines, in file order; throws std::invalid_argument naming the
// file and line of the first bad one.
std::vector<CaseRecord> read_case_records(const std::string& path);

}  // namespace ssm::fuzz
