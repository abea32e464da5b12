// `fuzz --jobs N`: one campaign in N processes of this executable on this machine, merged into
// the result (and so the summary, verdicts and report) of the campaign run in one process.
// Process j runs shard j of N of the campaign's cases (within --shard I/M: shard I + j*M of N*M),
// without shrinking, writing a record per case (`--case-records`); fuzz/campaign_merge.h merges
// the records and runs the first failing case once more, here, with shrinking and dumps.
// RapidCheck keeps its generation state in process-wide statics, so cases cannot run on threads
// of one process; processes also keep each its own CUDA context.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/tolerance_options.h"
#include "fuzz/backend_entry.h"
#include "fuzz/campaign.h"

namespace ssm::cli {

// Set by run_campaign_in_processes on its workers (to its pid): main() of a worker then asks the
// kernel to kill it when that process ends.
constexpr const char* kDieWithParentVariable = "SSMCHECK_DIE_WITH_PARENT";

// `args`: this command line (argv, program first); the flags that name outputs, the partition,
// the device and shrinking are replaced in the processes' copies. Throws std::runtime_error when a
// process fails otherwise than by a failing case (its log is kept and named).
fuzz::CampaignResult run_campaign_in_processes(const fuzz::CampaignOptions& o, int jobs,
                                               const std::vector<std::string>& args, const fuzz::BackendEntry& be);

// The OpenMP threads (the reference's and the comparison's) of each of `jobs` processes, as the
// processes get it in OMP_NUM_THREADS: the user's OMP_NUM_THREADS when set, else this machine's
// cores shared out among the processes (at least 1). The thread count changes no result.
std::string omp_threads_per_job(int jobs);

// What fuzz's and gate's banners add for --jobs: ", in N processes of T OpenMP threads" ("" for 1).
std::string jobs_banner(int jobs);

// The `ssmcheck fuzz` command line (program first) that runs campaign `o` on backend `be`, with
// the tolerance flags `tol` (those `o.tolerances` came from): what `gate --jobs` hands
// run_campaign_in_processes for each of its campaigns. Throws std::logic_error for an option no
// fuzz flag expresses (numerics other than the backend's, a time bound).
std::vector<std::string> fuzz_command_line(const fuzz::CampaignOptions& o, const fuzz::BackendEntry& be,
                                           const ToleranceOptions& tol);

// This process's command line (/proc/self/cmdline).
std::vector<std::string> own_command_line();

}  // namespace ssm::cli
