// Plug-ins run in their host process (plugin/host_process.h): whatever a plug-in does in any call
// (exit with any code, abort, a fatal signal, a stack overflow, a hang, a busy loop, writes to
// stdout, writes past its buffers, being killed) ends with a non-zero exit, a verdict naming the
// call, well-formed JSON and JUnit, and no process left behind; in a campaign it is a failure
// like any other, shrunk, with a rerun line that reproduces it. Uses tests/plugins/hostile_plugin.cpp.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/child_process.h"
#include "tests/support/shell.h"

namespace ssm {
namespace {

using test::q;
using test::sh;

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Processes whose command line mentions `needle` (the test's own copy of the plug-in), after
// giving the kernel a moment to deliver the parent-death signal.
int processes_mentioning(const std::string& needle) {
  int n = 0;
  for (int tries = 0; tries < 40; ++tries) {
    n = 0;
    DIR* d = opendir("/proc");
    while (dirent* e = d ? readdir(d) : nullptr) {
      if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
      std::string cmd = read(std::string("/proc/") + e->d_name + "/cmdline");
      for (char& c : cmd)
        if (c == '\0') c = ' ';
      if (cmd.find(needle) != std::string::npos) ++n;
    }
    if (d) closedir(d);
    if (n == 0) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return n;
}

class Hosted : public ::testing::Test {
 protected:
  void SetUp() override {
    // a copy of its own, so that the process check sees this test's hosts only
    plugin_ = dir_.file("libhostile_" + std::to_string(::getpid()) + ".so");
    std::filesystem::copy_file(SSMCHECK_HOSTILE_PLUGIN, plugin_);
  }
  std::string backend(const std::string& options) const { return q("plugin:" + plugin_ + "," + options); }
  test::TempDir dir_{"ssmcheck-hosted"};
  std::string plugin_;
};

constexpr const char* kScript = "alloc; prefill 3; checkpoint; verify 3; commit 2 3; decode; rollback 0";

// Every fault in every call: a failing verdict naming the call, exit 1 (or 2 where the instance
// cannot be made at all), JSON and JUnit intact, no host left.
TEST_F(Hosted, EveryFaultInEveryCallIsAVerdictNamingTheCall) {
  const std::vector<std::string> kinds = {"exit0", "exit3", "abort", "segv", "stack", "hang", "spin", "sigkill",
                                          "overrun", "overrun_small"};
  const std::vector<std::string> calls = {"create_pool", "alloc", "prefill", "checkpoint", "verify",
                                          "commit", "decode", "rollback", "export_state"};
  const std::string json = dir_.file("v.json"), junit = dir_.file("v.xml");
  for (const std::string& call : calls)
    for (const std::string& kind : kinds) {
      if ((kind == "overrun" || kind == "overrun_small") &&
          !(call == "prefill" || call == "verify" || call == "decode" || call == "export_state"))
        continue;  // only these calls are handed output buffers
      SCOPED_TRACE(kind + " in " + call);
      std::filesystem::remove(json);
      std::filesystem::remove(junit);
      const auto s = sh(std::string(SSMCHECK_BIN) + " --call-timeout 1 check --backend " +
                        backend("fault=" + kind + ",at=" + call) + " --ops " + q(kScript) + " --json " + q(json) +
                        " --junit " + q(junit));
      // a pool that cannot be made is bad input (2, as any failing create_pool); an op, a divergence (1)
      EXPECT_EQ(s.code, call == "create_pool" ? 2 : 1) << s.out;
      EXPECT_NE(s.out.find(" during " + call + "("), std::string::npos) << s.out;
      if (kind == "hang" || kind == "spin") {
        EXPECT_NE(s.out.find("did not answer within 1 s (--call-timeout) and was killed"), std::string::npos) << s.out;
      }
      if (kind == "exit0" || kind == "exit3") {
        EXPECT_NE(s.out.find(std::string("exited ") + (kind == "exit0" ? "0" : "3")), std::string::npos) << s.out;
      }
      const std::string past = call == "export_state" ? "export_state's layer 0 h" : "the output of entry 0 layer 0";
      if (kind == "overrun") {  // the page after the buffer
        EXPECT_NE(s.out.find("fatal signal 11 (Segmentation fault) during"), std::string::npos) << s.out;
        EXPECT_NE(s.out.find("a write past the end of " + past), std::string::npos) << s.out;
      }
      if (kind == "overrun_small") {  // the canary bytes up to that page, or the page itself
        EXPECT_TRUE(s.out.find("wrote past the end of " + past) != std::string::npos ||
                    s.out.find("a write past the end of " + past) != std::string::npos)
            << s.out;
      }
      nlohmann::json v;
      EXPECT_NO_THROW(v = nlohmann::json::parse(read(json))) << read(json);
      EXPECT_NE(read(junit).find("failures=\"1\""), std::string::npos) << read(junit);
      EXPECT_EQ(processes_mentioning(plugin_), 0);
    }
}

// An instance that cannot be made, or a library whose loading ends its host: exit 2 naming it.
TEST_F(Hosted, AFaultWhileLoadingOrCreatingIsExitTwoNamingIt) {
  for (const std::string kind : {"exit0", "segv"}) {
    const auto s = sh("SSMCHECK_HOSTILE_AT_LOAD=" + kind + " " + SSMCHECK_BIN + " check --backend " +
                      q("plugin:" + plugin_) + " --ops 'alloc; decode'");
    EXPECT_EQ(s.code, 2) << s.out;
    EXPECT_NE(s.out.find("during start-up (loading plugin:"), std::string::npos) << s.out;
    EXPECT_NE(s.out.find(kind == "exit0" ? "exited 0" : "killed by signal 11"), std::string::npos) << s.out;
  }
  const auto c = sh(std::string(SSMCHECK_BIN) + " check --backend " + backend("fault=abort,at=create") +
                    " --ops 'alloc; decode'");
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.out.find("killed by signal 6 (Aborted) during create("), std::string::npos) << c.out;
  EXPECT_EQ(processes_mentioning(plugin_), 0);
}

// What a plug-in prints stays out of `--json -`: the verdict is the only thing on stdout.
TEST_F(Hosted, APluginsOutputNeverReachesTheVerdict) {
  const std::string out = dir_.file("stdout");
  const auto s = sh("(" + std::string(SSMCHECK_BIN) + " check --backend " + backend("fault=stdout,at=decode") +
                    " --ops " + q(kScript) + " --json - 2>/dev/null) > " + q(out));
  EXPECT_EQ(s.code, 0) << s.out;
  nlohmann::json v;
  EXPECT_NO_THROW(v = nlohmann::json::parse(read(out))) << read(out).substr(0, 400);
  EXPECT_EQ(read(out).find("xxxxxxxx"), std::string::npos);
}

// In a campaign a crash is a failure like any other: shrunk to the call that crashes, and the
// rerun line it prints fails the same way.
TEST_F(Hosted, ACrashInACampaignIsShrunkAndItsRerunReproducesIt) {
  const auto s = sh(std::string(SSMCHECK_BIN) + " fuzz --cases 300 --seed 5 --backend " +
                    backend("fault=segv,at=commit") + " --out " + q(dir_.file("out")));
  ASSERT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("killed by signal 11 (Segmentation fault) during commit("), std::string::npos) << s.out;
  const size_t at = s.out.find("rerun:");
  ASSERT_NE(at, std::string::npos) << s.out;
  std::string rerun = s.out.substr(at + 6, s.out.find('\n', at) - at - 6);
  rerun = rerun.substr(rerun.find_first_not_of(' '));
  EXPECT_NE(rerun.find("commit"), std::string::npos) << rerun;
  const size_t ops = rerun.find("--ops '");
  ASSERT_NE(ops, std::string::npos) << rerun;
  const std::string script = rerun.substr(ops + 7, rerun.find('\'', ops + 7) - ops - 7);
  EXPECT_LE(std::count(script.begin(), script.end(), ';') + 1, 4) << script;
  const size_t exe = rerun.find(' ');
  const auto again = sh(std::string(SSMCHECK_BIN) + rerun.substr(exe));
  EXPECT_EQ(again.code, 1) << rerun << "\n" << again.out;
  EXPECT_NE(again.out.find("killed by signal 11 (Segmentation fault) during commit("), std::string::npos) << again.out;
  EXPECT_EQ(processes_mentioning(plugin_), 0);
}

// A case the plug-in cannot set up (create_pool crashes) fails as itself: its drawn configuration
// and the plug-in's message, and its rerun line fails the same way (exit 2: the set-up).
TEST_F(Hosted, ACaseThatCannotBeSetUpIsReportedAsItself) {
  const auto s = sh(std::string(SSMCHECK_BIN) + " fuzz --cases 20 --seed 4 --backend " +
                    backend("fault=segv,at=create_pool"));
  ASSERT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("setting up the case failed: "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("killed by signal 11 (Segmentation fault) during create_pool("), std::string::npos) << s.out;
  const size_t at = s.out.find("rerun:");
  ASSERT_NE(at, std::string::npos) << s.out;
  std::string rerun = s.out.substr(at + 6, s.out.find('\n', at) - at - 6);
  rerun = rerun.substr(rerun.find("ssmcheck ") + 8);
  EXPECT_NE(rerun.find("--ops ''"), std::string::npos) << rerun;
  const auto again = sh(std::string(SSMCHECK_BIN) + rerun);
  EXPECT_EQ(again.code, 2) << rerun << "\n" << again.out;
  EXPECT_NE(again.out.find("killed by signal 11 (Segmentation fault) during create_pool("), std::string::npos)
      << again.out;
}

// No process outlives ssmcheck, however it ends: SIGKILL of a `fuzz --jobs 2` whose plug-in hangs
// takes its workers and their hosts with it.
TEST_F(Hosted, NoProcessOutlivesAKilledSsmcheck) {
  for (const std::string jobs : {"1", "2"}) {
    // a SIGKILLed parent cannot remove its ssmcheck-jobs-* directory: it goes into this test's own
    const std::string tmp = dir_.file("tmp-kill-" + jobs);
    std::filesystem::create_directories(tmp);
    const auto s = sh("TMPDIR=" + q(tmp) + " " + std::string(SSMCHECK_BIN) + " fuzz --cases 50 --jobs " + jobs +
                      " --backend " + backend("fault=hang,at=decode") + " > /dev/null 2>&1 & echo $!");
    const int pid = std::atoi(s.out.c_str());
    ASSERT_GT(pid, 0) << s.out;
    // the hosts are up, one per worker hanging (and, with --jobs, the parent's own, which checked
    // that the plug-in loads)
    int up = 0;
    const int want = jobs == "1" ? 1 : std::stoi(jobs) + 1;
    for (int i = 0; i < 200 && up < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      up = 0;
      DIR* d = opendir("/proc");
      while (dirent* e = d ? readdir(d) : nullptr) {
        const std::string cmd = read(std::string("/proc/") + e->d_name + "/cmdline");
        if (cmd.rfind(std::string(SSMCHECK_BIN) + "-plugin-host", 0) == 0 && cmd.find(plugin_) != std::string::npos) ++up;
      }
      if (d) closedir(d);
    }
    EXPECT_EQ(up, want) << "hosts running before the kill, --jobs " << jobs;
    ::kill(pid_t(pid), SIGKILL);
    EXPECT_EQ(processes_mentioning(plugin_), 0) << "--jobs " << jobs;
  }
}

// SIGTERM or SIGINT to `fuzz --jobs 2`: its workers and their hosts are stopped, their temporary
// directory removed, and ssmcheck says so with exit 2 and in its verdict files.
TEST_F(Hosted, AnInterruptedCampaignStopsItsProcessesAndLeavesNothing) {
  for (const std::string sig : {"TERM", "INT"}) {
    const std::string tmp = dir_.file("tmp-" + sig), log = dir_.file("log-" + sig);
    std::filesystem::create_directories(tmp);
    const std::string json = dir_.file("verdict-" + sig + ".json"), junit = dir_.file("verdict-" + sig + ".xml");
    const pid_t pid = start_child({SSMCHECK_BIN, "fuzz", "--cases", "50", "--jobs", "2", "--backend",
                                   "plugin:" + plugin_ + ",fault=hang,at=decode", "--json", json, "--junit", junit},
                                  environment_with("TMPDIR", tmp), log);
    bool jobs_dir = false;
    for (int i = 0; i < 200 && !jobs_dir; ++i) {  // the workers are running
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (const auto& e : std::filesystem::directory_iterator(tmp))
        jobs_dir = jobs_dir || e.path().filename().string().rfind("ssmcheck-jobs-", 0) == 0;
    }
    ASSERT_TRUE(jobs_dir) << "no ssmcheck-jobs-* directory in " << tmp;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(pid, sig == "TERM" ? SIGTERM : SIGINT);
    const int status = wait_child(pid, 20);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << sig << ": status " << status << "\n" << read(log);
    EXPECT_NE(read(log).find("interrupted by"), std::string::npos) << read(log);
    EXPECT_NE(read(json).find("interrupted: interrupted by"), std::string::npos) << read(json);
    EXPECT_NE(read(junit).find("failures=\"1\""), std::string::npos) << read(junit);
    EXPECT_EQ(processes_mentioning(plugin_), 0) << sig;
    EXPECT_TRUE(std::filesystem::is_empty(tmp)) << sig << ": something was left in " << tmp;
  }
}

// A correct plug-in through its host agrees bit for bit, as in ssmcheck's own process.
// A campaign's summary without its times: "in 0.4 s (9000 ops/s)" and the "time:" line.
std::string untimed(const std::string& out) {
  std::istringstream in(out);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.find("time:") != std::string::npos || line.rfind("ssmcheck fuzz:", 0) == 0) continue;
    const size_t at = line.find(" ops in ");
    if (at != std::string::npos) line.erase(at + 4, line.find("):", at) + 1 - at - 4);
    kept += line + "\n";
  }
  return kept;
}

// In its host process and in ssmcheck's, with the exports sent with the ops' replies (the default,
// plugin/host_wire.h kExportAfter) and without: the same campaign, the same summary.
TEST_F(Hosted, ACorrectPluginAgreesBitwiseInAndOutOfProcess) {
  std::string first;
  for (const std::string run : {"plugin:", "plugin-in-process:", "SSMCHECK_EXPORTS_WITH_OPS=off plugin:"}) {
    const size_t sp = run.find(' ');
    const std::string env = sp == std::string::npos ? "" : run.substr(0, sp + 1);
    const std::string scheme = run.substr(sp == std::string::npos ? 0 : sp + 1);
    const auto s = sh(env + SSMCHECK_BIN + " fuzz --cases 60 --seed 2 --backend " + q(scheme + plugin_));
    EXPECT_EQ(s.code, 0) << run << ": " << s.out;
    EXPECT_NE(s.out.find("passed"), std::string::npos) << s.out;
    EXPECT_NE(s.out.find("60 cases"), std::string::npos) << s.out;
    if (first.empty()) first = untimed(s.out);
    EXPECT_EQ(untimed(s.out), first) << run;
  }
}

// The exports travel with the op's reply (one round trip per op instead of one more per live
// sequence), and a fault in one is still named as export_state's: with them, "sent with the reply
// of" the op before it; with SSMCHECK_EXPORTS_WITH_OPS=off, a call of its own.
TEST_F(Hosted, ExportsSentWithAnOpsReplyAreNamedAsExports) {
  for (const std::string setting : {"on", "off"}) {
    const auto s = sh("SSMCHECK_EXPORTS_WITH_OPS=" + setting + " " + SSMCHECK_BIN + " check --backend " +
                      backend("fault=segv,at=export_state,nth=2") + " --ops " + q(kScript));
    EXPECT_EQ(s.code, 1) << s.out;
    EXPECT_NE(s.out.find("killed by signal 11 (Segmentation fault) during export_state(slot 0)"), std::string::npos)
        << s.out;
    // the second export follows prefill: sent with its reply, or asked for after it
    if (setting == "on") {
      EXPECT_NE(s.out.find("export_state(slot 0), sent with the reply of prefill(slot 0, 3 rows)"), std::string::npos)
          << s.out;
      EXPECT_NE(s.out.find("op 1 'prefill 3'"), std::string::npos) << s.out;
    } else {
      EXPECT_EQ(s.out.find("sent with the reply"), std::string::npos) << s.out;
      EXPECT_NE(s.out.find("exporting sequence @0 failed"), std::string::npos) << s.out;
    }
  }
  const auto bad = sh(std::string("SSMCHECK_EXPORTS_WITH_OPS=maybe ") + SSMCHECK_BIN + " check --backend " +
                      q("plugin:" + plugin_) + " --ops " + q(kScript));
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("SSMCHECK_EXPORTS_WITH_OPS is 'maybe'; it takes on (the default) or off"), std::string::npos)
      << bad.out;
  // a campaign refuses it before its first case: it is no failure of the plug-in's (was a failed case, exit 1)
  const auto bad_fuzz =
      sh(std::string("SSMCHECK_EXPORTS_WITH_OPS=maybe ") + SSMCHECK_BIN + " fuzz --cases 2 --backend " +
         q("plugin:" + plugin_) + " --out " + q(dir_.file("bad_setting")));
  EXPECT_EQ(bad_fuzz.code, 2) << bad_fuzz.out;
  EXPECT_NE(bad_fuzz.out.find("SSMCHECK_EXPORTS_WITH_OPS is 'maybe'"), std::string::npos) << bad_fuzz.out;
  EXPECT_EQ(bad_fuzz.out.find("FAILED"), std::string::npos) << bad_fuzz.out;
  EXPECT_EQ(processes_mentioning(plugin_), 0);
}

}  // namespace
}  // namespace ssm
