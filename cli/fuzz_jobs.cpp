#include "cli/fuzz_jobs.h"

#include <fmt/core.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "core/child_process.h"
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

// One process of the run: its partition, its record file read as it grows, how it ended.
struct Job {
  pid_t pid = 0;
  fs::path records, log;
  int first = 0, step = 1;  // its cases: first, first + step, ... (in this order)
  std::streamoff offset = 0;
  std::string partial;  // a line not yet complete
  std::vector<fuzz::CaseRecord> got;
  bool ended = false, stopped = false;  // stopped: ended by the parent after the first failure
  int status = 0;
  // Reads the complete lines appended since the last call.
  void read_new() {
    std::ifstream in(records, std::ios::binary);
    if (!in) return;
    in.seekg(offset);
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset += std::streamoff(chunk.size());
    partial += chunk;
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1))
      if (nl > 0)
        got.push_back(fuzz::case_record_from_json_line(partial.substr(0, nl),
                                                       records.string() + ":" + std::to_string(got.size() + 1)));
  }
  // The next case it would run.
  int next_case() const { return got.empty() ? first : got.back().index + step; }
  void stop() {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ended = stopped = true;
  }
};

// SIGINT or SIGTERM while the processes run: the signal's number (the handler only sets it).
volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int sig) { g_interrupted = sig; }

// Installs on_interrupt for SIGINT and SIGTERM while the processes run, and puts back what was there.
struct CatchInterrupts {
  struct sigaction old_int {}, old_term {};
  CatchInterrupts() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~CatchInterrupts() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
  CatchInterrupts(const CatchInterrupts&) = delete;
  CatchInterrupts& operator=(const CatchInterrupts&) = delete;
};

// Stops the processes still running when the parent leaves early (an exception: a bad record).
struct StopOnLeave {
  std::vector<Job>& jobs;
  ~StopOnLeave() {
    for (Job& j : jobs)
      if (!j.ended && j.pid > 0) j.stop();
  }
};

// Waits for every process. About once a second it reports the cases recorded so far, and once a
// case failed it stops the processes that have recorded every case of theirs below it (the merge
// ends at the first failing case, so their later cases would not count). A process that stops
// itself at its own failure ends normally.
void wait_all(std::vector<Job>& jobs, int total, const std::function<void(const std::string&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int64_t reported = -1;
  double next_read = 0.2, next_report = 1.0;
  for (size_t running = jobs.size(); running > 0;) {
    if (g_interrupted)  // StopOnLeave ends the processes, the caller removes their directory
      throw fuzz::Interrupted(std::string("interrupted by ") + strsignal(g_interrupted) + ": the " +
                        std::to_string(running) + " processes still running were stopped");
    for (Job& j : jobs)
      if (!j.ended && child_ended(j.pid, &j.status)) {
        j.ended = true;
        --running;
      }
    if (seconds() >= next_read || running == 0) {
      int first_failing = INT_MAX;
      int64_t recorded = 0;
      for (Job& j : jobs) {
        j.read_new();
        recorded += int64_t(j.got.size());
        for (const fuzz::CaseRecord& r : j.got)
          if (r.status != fuzz::CaseRecord::Status::pass) first_failing = std::min(first_failing, r.index);
      }
      for (Job& j : jobs)
        if (!j.ended && first_failing != INT_MAX && j.next_case() > first_failing) {
          j.stop();
          --running;
        }
      if (progress && (seconds() >= next_report || running == 0) && recorded != reported) {
        progress(fmt::format("{}/{} cases in {} processes ({} running){}, {:.1f} s", recorded, total, jobs.size(),
                             running, first_failing != INT_MAX ? fmt::format(", case {} failed", first_failing) : "",
                             seconds()));
        reported = recorded;
        next_report = seconds() + 1.0;
      }
      next_read = seconds() + 0.2;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

// Without it, N processes of a thread per core each would run N times too many threads (the CUDA
// campaign on the H200 ran slower in 8 processes than in 2).
std::string omp_threads_per_job(int jobs) {
  const char* user = std::getenv("OMP_NUM_THREADS");
  if (user && *user) return user;
  return std::to_string(std::max(1, int(std::thread::hardware_concurrency()) / std::max(jobs, 1)));
}

std::string jobs_banner(int jobs) {
  return jobs > 1 ? fmt::format(", in {} processes of {} OpenMP threads", jobs, omp_threads_per_job(jobs)) : "";
}

std::vector<std::string> fuzz_command_line(const fuzz::CampaignOptions& o, const fuzz::BackendEntry& be,
                                           const ToleranceOptions& tol) {
  if (o.duration_s > 0) throw std::logic_error("fuzz_command_line: a time-bound campaign has no fixed cases");
  if (!(o.numerics == be.numerics))
    throw std::logic_error("fuzz_command_line: numerics other than backend " + be.flag + "'s");
  std::vector<std::string> a = {self_executable().string(), "fuzz", "--backend", be.flag, "--seed",
                                std::to_string(o.seed), "--cases", std::to_string(o.cases), "--max-ops",
                                std::to_string(o.max_ops)};
  if (o.shards > 1) a.insert(a.end(), {"--shard", fmt::format("{}/{}", o.shard, o.shards)});
  if (o.config_path) a.insert(a.end(), {"--config", *o.config_path});
  else if (o.preset) a.insert(a.end(), {"--preset", *o.preset});
  if (o.layers > 0) a.insert(a.end(), {"--layers", std::to_string(o.layers)});
  if (o.h_mode) a.insert(a.end(), {"--h-mode", to_string(*o.h_mode)});
  if (!tol.spec.empty()) a.insert(a.end(), {"--tolerance", tol.spec});
  if (!tol.file.empty()) a.insert(a.end(), {"--tolerance-file", tol.file});
  if (o.pause_async) a.push_back("--pause-async");
  if (o.require_coverage) a.push_back("--require-coverage");
  return a;
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  if (args.empty()) throw std::runtime_error("cannot read this process's command line (/proc/self/cmdline)");
  return args;
}

fuzz::CampaignResult run_campaign_in_processes(const fuzz::CampaignOptions& o, int jobs,
                                               const std::vector<std::string>& args, const fuzz::BackendEntry& be) {
  const auto start = std::chrono::steady_clock::now();
  // no idle processes: at most one per case of this shard
  const int cases_here = o.cases > o.shard ? (o.cases - o.shard + o.shards - 1) / o.shards : 0;
  jobs = std::max(1, std::min(jobs, cases_here));
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
  std::vector<std::string> env = environment_with("OMP_NUM_THREADS", omp_threads_per_job(jobs));
  env.push_back(std::string(kDieWithParentVariable) + "=" + std::to_string(::getpid()));
  std::vector<Job> procs(static_cast<size_t>(jobs));
  const CatchInterrupts catch_interrupts;
  const StopOnLeave stop_on_leave{procs};
  for (int j = 0; j < jobs; ++j) {
    Job& p = procs[size_t(j)];
    const fs::path job = dir / fmt::format("job-{}", j);
    p.records = job.string() + ".jsonl";
    p.log = job.string() + ".log";
    const fuzz::CampaignOptions part = fuzz::job_options(o, j, jobs);
    p.first = part.shard;
    p.step = part.shards;
    std::vector<std::string> a = base;
    for (const std::string& s : {std::string("--shard"), fmt::format("{}/{}", p.first, p.step), std::string("--out"),
                                 job.string(), std::string("--no-shrink"), std::string("--case-records"),
                                 p.records.string()})
      a.push_back(s);
    p.pid = start_child(a, env, p.log.string());
  }
  const int total = o.cases > o.shard ? (o.cases - o.shard + o.shards - 1) / o.shards : 0;
  try {
    wait_all(procs, total, o.progress);
  } catch (const fuzz::Interrupted&) {  // nothing is left behind: the processes stop, their directory goes
    for (Job& j : procs)
      if (!j.ended && j.pid > 0) j.stop();
    std::error_code ec;
    fs::remove_all(dir, ec);
    throw;
  } catch (const std::exception& e) {  // the records and logs stay for a look; the processes stop
    throw std::runtime_error(std::string("fuzz --jobs: ") + e.what() + " (the processes' records and logs: " +
                             dir.string() + ")");
  }
  std::vector<fuzz::CaseRecord> records;
  std::string errors;
  for (size_t j = 0; j < procs.size(); ++j) {
    const Job& p = procs[j];
    const bool verdict = p.stopped || (WIFEXITED(p.status) && (WEXITSTATUS(p.status) == kExitOk ||
                                                               WEXITSTATUS(p.status) == kExitDiffer ||
                                                               WEXITSTATUS(p.status) == kExitNothingRan));
    if (!verdict || (!p.stopped && !p.partial.empty())) {
      errors += fmt::format("job {} (shard {}/{}) {}; its log {}:\n{}", j, p.first, p.step,
                            verdict ? "left an unfinished record" : describe_wait_status(p.status), p.log.string(),
                            log_tail(p.log, 8));
      continue;
    }
    records.insert(records.end(), p.got.begin(), p.got.end());
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
