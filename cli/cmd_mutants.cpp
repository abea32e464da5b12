// `ssmcheck mutants`: runs the default gate against every mutant of the catalogue
// (fuzz/mutant_catalogue.cpp) and prints the kill table; a race mutant (MutantInfo::race_ops) is
// judged by compute-sanitizer racecheck on its script instead. Each mutant runs in a child process of
// the mutant build (`ssmcheck-mutants`, next to this binary: the same CLI with the mutant sites
// compiled in) with SSMCHECK_MUTANT=<name>, so the shipped binary carries no mutant and a
// mutant that crashes still yields a row of the table.
#include <fmt/core.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/child_process.h"
#include "cli/commands.h"
#include "cli/default_paths.h"
#include "cli/device_option.h"
#include "cli/output_path.h"
#include "cli/backend_registry.h"
#include "formats/verdict_text.h"
#include "fuzz/mutant_catalogue.h"

namespace ssm::cli {

namespace {

namespace fs = std::filesystem;

struct MutantsFlags {
  std::string backend = "all", traces = default_traces_dir(), only, json, binary, logs;
  int cases = 1000;
  uint64_t seed = 1;
  double timeout = 1800;
};

struct Row {
  fuzz::MutantInfo m;
  std::string verdict;  // "killed", "SURVIVED", "skipped", "error"
  double seconds = 0;
  std::string check;    // the first failing check
  int shrunk = -1;      // ops of the minimal failing script (campaign kills)
  std::string note;
};

fs::path self_dir() { return self_executable().parent_path(); }

// The backends the catalogue has mutants of, in its order ("reference", "cuda"): what --backend takes
// besides "all".
std::vector<std::string> mutated_backends() {
  std::vector<std::string> v;
  for (const fuzz::MutantInfo& m : fuzz::mutant_catalogue())
    if (std::find(v.begin(), v.end(), m.backend) == v.end()) v.push_back(m.backend);
  return v;
}

// Runs argv with SSMCHECK_MUTANT=mutant, stdout and stderr to log; returns the wait status, or -1
// when it ran past timeout_s (then it is killed).
int run_child(const std::vector<std::string>& argv, const std::string& mutant, const std::string& log,
              double timeout_s) {
  return wait_child(start_child(argv, environment_with("SSMCHECK_MUTANT", mutant), log), timeout_s);
}

// compute-sanitizer from CUDA's bin/ or PATH; empty when there is none.
fs::path compute_sanitizer() {
  std::vector<fs::path> dirs = {"/usr/local/cuda/bin"};
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t a = 0, b; a <= p.size(); a = b + 1) {
      b = p.find(':', a);
      if (b == std::string::npos) b = p.size();
      if (b > a) dirs.emplace_back(p.substr(a, b - a));
    }
  }
  for (const fs::path& d : dirs)
    if (std::error_code ec; fs::exists(d / "compute-sanitizer", ec)) return d / "compute-sanitizer";
  return {};
}

// The race errors racecheck reported in a log ("RACECHECK SUMMARY: N hazards displayed (E errors,
// W warnings)"); -1 when the log has no summary.
int64_t race_errors(const std::string& log) {
  std::ifstream in(log);
  std::string line;
  int64_t errors = -1;
  while (std::getline(in, line)) {
    const size_t s = line.find("RACECHECK SUMMARY:");
    const size_t o = line.find('(', s);
    if (s != std::string::npos && o != std::string::npos) errors = std::strtoll(line.c_str() + o + 1, nullptr, 10);
  }
  return errors;
}

// A race mutant (MutantInfo::race_ops): racecheck on its script must report race errors with the
// mutant and none without it.
Row run_race_mutant(const fuzz::MutantInfo& m, const MutantsFlags& f, const fs::path& binary, const fs::path& dir) {
  Row row;
  row.m = m;
  const fs::path cs = compute_sanitizer();
  if (cs.empty()) {
    row.verdict = "skipped";
    row.note = "a race, judged by compute-sanitizer racecheck, which is not installed (/usr/local/cuda/bin, PATH)";
    return row;
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t errors[2] = {0, 0};  // with the mutant, without
  for (int i = 0; i < 2; ++i) {
    const std::string log = (dir / (m.name + (i ? ".racecheck-shipped.log" : ".racecheck.log"))).string();
    const int status = run_child({cs.string(), "--tool", "racecheck", "--racecheck-report", "hazard", binary.string(),
                                  "check", "--preset", m.race_preset, "--backend", m.backend, "--ops", m.race_ops},
                                 i ? "" : m.name, log, f.timeout);
    errors[i] = status == -1 ? -1 : race_errors(log);
    if (errors[i] < 0) {
      row.verdict = "error";
      row.note = status == -1 ? fmt::format("racecheck ran past --timeout {} s (log: {})", f.timeout, log)
                              : fmt::format("racecheck printed no summary (log: {})", log);
      return row;
    }
  }
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (errors[1] > 0) {
    row.verdict = "error";
    row.note = fmt::format("the shipped code races on the same script: {} racecheck errors", errors[1]);
    return row;
  }
  row.verdict = errors[0] > 0 ? "killed" : "SURVIVED";
  row.check = errors[0] > 0 ? fmt::format("racecheck: {} race errors on '{}' ({}; the shipped code: 0)", errors[0],
                                          m.race_ops, m.race_preset)
                            : std::string();
  if (errors[0] == 0) row.note = "racecheck reported no race on '" + m.race_ops + "'";
  return row;
}

Row run_mutant(const fuzz::MutantInfo& m, const MutantsFlags& f, const fs::path& binary, const fs::path& dir) {
  if (!m.race_ops.empty()) return run_race_mutant(m, f, binary, dir);
  Row row;
  row.m = m;
  const std::string json = (dir / (m.name + ".json")).string(), log = (dir / (m.name + ".log")).string();
  fs::remove(json);
  const auto start = std::chrono::steady_clock::now();
  const int status = run_child({binary.string(), "gate", "--backend", m.backend, "--cases", std::to_string(f.cases),
                                "--seed", std::to_string(f.seed), "--traces", f.traces, "--json", json,
                                // a kill must be a divergence; coverage depends on the cases, not the mutant
                                "--no-coverage"},
                               m.name, log, f.timeout);
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status == -1) {
    row.verdict = "SURVIVED";
    row.note = fmt::format("the gate ran past --timeout {} s (log: {})", f.timeout, log);
    return row;
  }
  if (WIFSIGNALED(status)) {  // a crash is caught, not silent: CI fails, the table says how
    row.verdict = "killed";
    row.check = fmt::format("the gate crashed ({})", strsignal(WTERMSIG(status)));
    row.note = "log: " + log;
    return row;
  }
  std::ifstream in(json);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception&) {
    row.verdict = "error";
    row.note = fmt::format("the gate exited {} without a JSON verdict (log: {})", WEXITSTATUS(status), log);
    return row;
  }
  if (j.value("pass", true)) {
    row.verdict = "SURVIVED";
    row.note = "log: " + log;
    return row;
  }
  row.verdict = "killed";
  for (const auto& c : j["cases"]) {
    if (c.value("status", "") != "fail") continue;
    std::string msg = c.value("message", "");
    if (msg.size() > 100) msg = msg.substr(0, 97) + "...";
    row.check = c.value("suite", "") + ": " + msg;
    row.shrunk = c.value("shrunk_ops", -1);
    break;
  }
  return row;
}

int run_mutants(const MutantsFlags& f) {
  prepare_output_file(f.json, "--json");
  reserve_stdout_for(f.json);
  const fs::path binary = f.binary.empty() ? self_dir() / "ssmcheck-mutants" : fs::path(f.binary);
  if (!fs::exists(binary))
    throw std::invalid_argument("mutant build not found: " + binary.string() +
                                " (build the ssmcheck-mutants target, or pass --binary)");
  const std::vector<std::string> mutated = mutated_backends();
  if (f.backend != "all" && std::find(mutated.begin(), mutated.end(), f.backend) == mutated.end()) {
    std::string expected = "all";
    for (size_t i = 0; i < mutated.size(); ++i) expected += (i + 1 == mutated.size() ? " or " : ", ") + mutated[i];
    throw std::invalid_argument("--backend: '" + f.backend + "' (expected " + expected + ")");
  }
  std::vector<std::string> only;
  if (!f.only.empty()) {
    size_t p = 0;
    while (p <= f.only.size()) {
      const size_t q = f.only.find(',', p);
      only.push_back(f.only.substr(p, q == std::string::npos ? std::string::npos : q - p));
      if (q == std::string::npos) break;
      p = q + 1;
    }
    for (const auto& n : only)
      if (!fuzz::find_mutant(n)) throw std::invalid_argument("--only: unknown mutant '" + n + "'");
  }
  std::vector<std::pair<std::string, std::string>> skipped;
  const auto available = select_backends("all", &skipped);  // an unavailable backend's mutants are skipped
  auto has = [&](const std::string& b) {
    for (const auto& a : available)
      if (a.name == b) return true;
    return false;
  };
  fs::path dir(f.logs);
  if (f.logs.empty()) {
    // a fresh private directory (mkdtemp), never a predictable name in /tmp: one made there
    // beforehand by someone else, with symlinks at the log names, would have them followed
    std::string made = (fs::temp_directory_path() / "ssmcheck-mutants-XXXXXX").string();
    if (!mkdtemp(made.data()))
      throw std::runtime_error(std::string("cannot create a directory for the logs: ") + std::strerror(errno));
    dir = made;
  }
  prepare_output_dir(dir.string(), "--logs");
  fmt::print("ssmcheck mutants: {} (seed {}, {} cases per campaign), logs in {}\n", binary.string(), f.seed, f.cases,
             dir.string());
  std::vector<Row> rows;
  for (const fuzz::MutantInfo& m : fuzz::mutant_catalogue()) {
    if (!only.empty() && std::find(only.begin(), only.end(), m.name) == only.end()) continue;
    if (f.backend != "all" && m.backend != f.backend) continue;
    if (!has(m.backend)) {
      Row r;
      r.m = m;
      r.verdict = "skipped";
      for (const auto& s : skipped)
        if (s.first == m.backend) r.note = s.second;
      rows.push_back(r);
      continue;
    }
    rows.push_back(run_mutant(m, f, binary, dir));
    const Row& r = rows.back();
    fmt::print(stderr, "ssmcheck mutants: {} {} in {:.1f} s {}\n", r.m.name, r.verdict, r.seconds, r.check);
  }
  int killed = 0, survived = 0, ran = 0;
  std::vector<int> shrunk;
  fmt::print("{:<38} {:>5} {:<9} {:<9} {:>8} {:>6}  {}\n", "mutant", "class", "backend", "verdict", "seconds", "ops",
             "failing check");
  for (const Row& r : rows) {
    fmt::print("{:<38} {:>5} {:<9} {:<9} {:>8.1f} {:>6}  {}\n", r.m.name, r.m.bug_class, r.m.backend, r.verdict,
               r.seconds, r.shrunk >= 0 ? std::to_string(r.shrunk) : "-", r.check.empty() ? r.note : r.check);
    if (r.verdict == "skipped") continue;
    ++ran;
    if (r.verdict == "killed") ++killed;
    else ++survived;
    if (r.shrunk >= 0) shrunk.push_back(r.shrunk);
  }
  std::sort(shrunk.begin(), shrunk.end());
  fmt::print("{} of {} mutants killed{}", killed, ran,
             shrunk.empty() ? std::string() : fmt::format(", median shrunk script {} ops", shrunk[shrunk.size() / 2]));
  for (const auto& u : fuzz::uncovered_bug_classes()) fmt::print("; bug class {} has no mutant: {}", u.bug_class, u.why);
  fmt::print("\n");
  if (!f.json.empty()) {
    nlohmann::json j = {{"schema", "ssmcheck-mutants"}, {"schema_version", 1}, {"tool", "ssmcheck mutants"},
                        {"seed", f.seed}, {"cases_per_campaign", f.cases}, {"killed", killed}, {"ran", ran}};
    j["mutants"] = nlohmann::json::array();
    for (const Row& r : rows)
      j["mutants"].push_back({{"name", r.m.name}, {"class", r.m.bug_class}, {"backend", r.m.backend},
                              {"what", r.m.what}, {"verdict", r.verdict}, {"seconds", r.seconds},
                              {"failing_check", r.check}, {"shrunk_ops", r.shrunk}, {"note", r.note}});
    write_text_atomically(f.json, files::json_text(j) + "\n", "--json");
  }
  if (f.logs.empty()) {  // the private directory it made: gone when no mutant left a log in it
    std::error_code ec;
    if (fs::is_empty(dir, ec)) fs::remove(dir, ec);
  }
  if (ran == 0) return kExitNothingRan;
  return survived ? kExitDiffer : kExitOk;
}

}  // namespace

void add_mutants_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("mutants", "run the default gate against every catalogue mutant; print the kill table");
  auto f = std::make_shared<MutantsFlags>();
  cmd->add_option("--backend", f->backend, "all, reference (CPU mutants) or cuda (CUDA mutants)")->capture_default_str();
  add_device_option(cmd);
  cmd->add_option("--cases", f->cases, "cases per gate campaign")->capture_default_str()->check(CLI::Range(1, 10000000));
  cmd->add_option("--seed", f->seed, "gate seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--traces", f->traces, "golden traces for the gate")->capture_default_str();
  cmd->add_option("--only", f->only, "comma list of mutant names");
  cmd->add_option("--json", f->json, "write the table as JSON");
  cmd->add_option("--binary", f->binary, "the mutant build (default: ssmcheck-mutants next to this binary)");
  cmd->add_option("--logs", f->logs, "directory for each mutant's gate log and JSON (default: a temp dir)");
  cmd->add_option("--timeout", f->timeout, "seconds per mutant before it counts as survived")
      ->capture_default_str()
      ->check(finite_seconds());
  cmd->callback([=] { *rc = run_mutants(*f); });
}

}  // namespace ssm::cli
