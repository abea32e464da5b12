#include "cli/fuzz_jobs.h"

#include <fmt/core.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <thread>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "cli/child_process.h"
#include "cli/commands.h"
#include "fuzz/campaign_merge.h"

namespace ssm::cli {

namespace {

namespace fs = std::filesystem;

// The flags a process's command line must not inherit (each takes a value but --no-shrink): those
// naming outputs, the partition, the device (the parent narrowed CUDA_VISIBLE_DEVICES already) and
// shrinking. A fuzz flag added later that writes a file belongs here too (docs/fuzzing.md,
// "Processes").
bool replaced_flag(const std::string& a, bool* takes_value) {
  for (const char* f : {"--jobs", "--json", "--junit", "--html", "--out", "--shard", "--device", "--case-records"}) {
    if (a == f) {
      *takes_value = true;
      return true;
    }
    if (a.rfind(std::string(f) + "=", 0) == 0) {
      *takes_value = false;
      return true;
    }
  }
  *takes_value = false;
  return a == "--no-shrink";
}

std::string log_tail(const fs::path& log, size_t lines) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string s;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) s += "  | " + all[i] + "\n";
  return s;
}

// Lines appended to a file since the last call (offset: bytes counted so far).
int64_t new_lines(const fs::path& file, std::streamoff* offset) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return 0;
  in.seekg(*offset);
  int64_t n = 0;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) n += buf[i] == '\n';
    *offset += in.gcount();
  }
  return n;
}

// Waits for every process; about once a second reports the cases recorded so far (the records'
// lines). Returns the wait statuses, in process order.
std::vector<int> wait_all(const std::vector<pid_t>& pids, const std::vector<fs::path>& records, int total,
                          const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<int> status(pids.size(), 0);
  std::vector<bool> ended(pids.size(), false);
  std::vector<std::streamoff> offset(pids.size(), 0);
  int64_t recorded = 0, reported = -1;
  double next_report = 1.0;
  for (size_t running = pids.size(); running > 0;) {
    for (size_t j = 0; j < pids.size(); ++j)
      if (!ended[j] && child_ended(pids[j], &status[j])) {
        ended[j] = true;
        --running;
      }
    if (progress && (seconds() >= next_report || running == 0)) {
      for (size_t j = 0; j < pids.size(); ++j) recorded += new_lines(records[j], &offset[j]);
      if (recorded != reported)
        progress(fmt::format("{}/{} cases in {} processes ({} running), {:.1f} s", recorded, total, pids.size(),
                             running, seconds()));
      reported = recorded;
      next_report = seconds() + 1.0;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

}  // namespace

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  if (args.empty()) throw std::runtime_error("cannot read this process's command line (/proc/self/cmdline)");
  return args;
}

fuzz::CampaignResult run_campaign_in_processes(const fuzz::CampaignOptions& o, int jobs,
                                               const std::vector<std::string>& args, const fuzz::BackendEntry& be) {
  if (o.duration_s > 0)
    throw std::invalid_argument("--jobs runs a campaign of fixed cases; --duration (exploratory) runs in one process");
  const auto start = std::chrono::steady_clock::now();
  std::string dir_template = (fs::temp_directory_path() / "ssmcheck-jobs-XXXXXX").string();
  if (!mkdtemp(dir_template.data())) throw std::runtime_error("cannot create a directory for the jobs' records");
  const fs::path dir = dir_template;
  std::vector<std::string> base = {self_executable().string()};
  for (size_t i = 1; i < args.size(); ++i) {
    bool takes_value = false;
    if (replaced_flag(args[i], &takes_value)) {
      if (takes_value) ++i;
      continue;
    }
    base.push_back(args[i]);
  }
  const std::vector<std::string> env = current_environment();
  std::vector<pid_t> pids;
  std::vector<fs::path> record_files;
  for (int j = 0; j < jobs; ++j) {
    std::vector<std::string> a = base;
    const fs::path job = dir / fmt::format("job-{}", j);
    record_files.push_back(job.string() + ".jsonl");
    for (const std::string& s : {std::string("--shard"), fmt::format("{}/{}", o.shard + j * o.shards, o.shards * jobs),
                                 std::string("--out"), job.string(), std::string("--no-shrink"),
                                 std::string("--case-records"), record_files.back().string()})
      a.push_back(s);
    pids.push_back(start_child(a, env, job.string() + ".log"));
  }
  const int total = o.cases > o.shard ? (o.cases - o.shard + o.shards - 1) / o.shards : 0;
  const std::vector<int> statuses = wait_all(pids, record_files, total, o.progress);
  std::vector<fuzz::CaseRecord> records;
  std::string errors;
  for (int j = 0; j < jobs; ++j) {
    const int status = statuses[size_t(j)];
    const fs::path job = dir / fmt::format("job-{}", j);
    const bool verdict = WIFEXITED(status) && (WEXITSTATUS(status) == kExitOk || WEXITSTATUS(status) == kExitDiffer ||
                                               WEXITSTATUS(status) == kExitNothingRan);
    if (!verdict) {
      errors += fmt::format("job {} (shard {}/{}) {}; its log {}:\n{}", j, o.shard + j * o.shards, o.shards * jobs,
                            describe_wait_status(status), job.string() + ".log", log_tail(job.string() + ".log", 8));
      continue;
    }
    std::vector<fuzz::CaseRecord> r = fuzz::read_case_records(record_files[size_t(j)].string());
    records.insert(records.end(), r.begin(), r.end());
  }
  if (!errors.empty()) throw std::runtime_error("fuzz --jobs: a process did not finish its cases:\n" + errors);
  fuzz::CampaignResult result;
  try {
    result = fuzz::merge_case_records(o, std::move(records), be.model, be.under_test);
  } catch (const std::exception& e) {  // the records and logs stay for a look
    throw std::runtime_error(std::string("fuzz --jobs: ") + e.what() + " (the processes' records and logs: " +
                             dir.string() + ")");
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return result;
}

}  // namespace ssm::cli
