// ssmcheck: command line entry point; subcommands live in cli/cmd_*.cpp.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <exception>
#include <vector>

#include "cli/backend_registry.h"
#include "cli/cmd_new.h"
#include "cli/commands.h"
#include "cli/crash_verdict.h"
#include "cli/fuzz_jobs.h"
#include "core/keep_freed_memory.h"
#include "plugin/host_process.h"

#ifndef SSMCHECK_VERSION
#define SSMCHECK_VERSION "unknown"
#endif

namespace ssm::cli {
const CLI::Validator& finite_seconds() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        double x = 0;
        try {
          size_t used = 0;
          x = std::stod(s, &used);
          if (used != s.size()) return "'" + s + "' is not a number of seconds";
        } catch (const std::exception&) {
          return "'" + s + "' is not a number of seconds";
        }
        if (!std::isfinite(x) || x <= 0) return "'" + s + "' must be a finite number of seconds > 0";
        return "";
      },
      "SECONDS > 0");
  return v;
}
namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> d(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = d[0];
    d[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cur = d[j];
      d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return d[b.size()];
}

// The closest of `names` to `word` when it is close enough to be a typo, else "".
std::string closest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  return best;
}
}  // namespace

std::string did_you_mean(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> subs;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) subs.push_back(s->get_name());
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string first = argv[1];
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (s->get_name() == first) sub = s;
  if (!sub) {
    const std::string c = closest(first, subs);
    std::string all;
    for (const auto& n : subs) all += (all.empty() ? "" : ", ") + n;
    return "ssmcheck: unknown subcommand '" + first + "'" + (c.empty() ? "" : " (did you mean '" + c + "'?)") +
           "; subcommands: " + all;
  }
  std::vector<std::string> flags;
  for (const CLI::Option* o : app.get_options())  // global flags (--call-timeout) go anywhere
    for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
  for (const CLI::Option* o : sub->get_options())
    for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    a = a.substr(0, a.find('='));
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) continue;
    const std::string c = closest(a, flags);
    return "ssmcheck " + first + ": unknown flag '" + a + "'" + (c.empty() ? "" : " (did you mean '" + c + "'?)") +
           "; see ssmcheck " + first + " --help";
  }
  return "";
}

}  // namespace ssm::cli

int main(int argc, char** argv) {
  // a --jobs worker ends with the ssmcheck that started it, however that one ends (SIGKILL too),
  // and so do its plug-ins' hosts (plugin/host_process.h): no process outlives a campaign
  if (const char* parent = std::getenv(ssm::cli::kDieWithParentVariable)) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::atol(parent) != long(::getppid())) ::_exit(ssm::cli::kExitBadInput);  // it ended before that
    ::unsetenv(ssm::cli::kDieWithParentVariable);
  }
  CLI::App app{"ssmcheck: reference-and-verification harness for the recurrent state of hybrid LLMs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ssmcheck " SSMCHECK_VERSION);
  app.fallthrough();  // global flags are taken after the subcommand too
  // the ten-minute start, as README.md opens with it
  app.footer(
      "Check your kernel (README.md, \"Check your kernel\"; docs/plugins.md):\n"
      "  ssmcheck new c mykernel                   # a plug-in skeleton with its CMakeLists.txt (or: new python)\n"
      "  cmake -S mykernel -B mykernel/build -DCMAKE_PREFIX_PATH=<ssmcheck's install prefix> && cmake --build mykernel/build\n"
      "  ssmcheck backends plugin:mykernel/build/libmykernel.so       # loads it, says what it declares\n"
      "  ssmcheck check --backend plugin:mykernel/build/libmykernel.so --ops alloc              # passes as generated\n"
      "  ssmcheck check --backend plugin:mykernel/build/libmykernel.so --ops 'alloc; prefill 3' # not implemented: fill in\n"
      "  ssmcheck fuzz  --backend plugin:mykernel/build/libmykernel.so --cases 1000\n"
      "  ssmcheck gate  --backend plugin:mykernel/build/libmykernel.so --junit gate.xml --html gate.html");
  // the time a plug-in or Python class has for one call in its host process (plugin/host_process.h);
  // kept in the environment so that --jobs workers and their hosts inherit it
  app.add_option_function<std::string>(
         "--call-timeout",
         [](const std::string& s) { ::setenv(ssm::plugin::kCallTimeoutVariable, s.c_str(), 1); },
         "seconds a plug-in or Python class has for one call before its host process is killed and the call fails "
         "(default " + std::to_string(int(ssm::plugin::kDefaultCallTimeout)) + ", or $SSMCHECK_CALL_TIMEOUT)")
      ->check(ssm::cli::finite_seconds());
  int rc = ssm::cli::kExitOk;
  ssm::cli::install_crash_handlers();
  ssm::keep_freed_memory();  // campaigns and replays copy large tensors on every op
  ssm::cli::add_run_command(app, &rc);
  ssm::cli::add_dump_command(app, &rc);
  ssm::cli::add_diff_command(app, &rc);
  ssm::cli::add_fuzz_command(app, &rc);
  ssm::cli::add_check_command(app, &rc);
  ssm::cli::add_record_command(app, &rc);
  ssm::cli::add_replay_command(app, &rc);
  ssm::cli::add_approve_command(app, &rc);
  ssm::cli::add_gate_command(app, &rc);
  ssm::cli::add_mutants_command(app, &rc);
  ssm::cli::add_backends_command(app, &rc);
  ssm::cli::add_report_command(app, &rc);
  ssm::cli::add_new_command(app, &rc);
  ssm::cli::add_reduce_command(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      const std::string hint = ssm::cli::did_you_mean(app, argc, argv);
      if (!hint.empty()) {
        std::fprintf(stderr, "%s\n", hint.c_str());
        return ssm::cli::kExitBadInput;
      }
    }
    const int code = app.exit(e);
    return code == 0 ? 0 : ssm::cli::kExitBadInput;
  } catch (const ssm::cli::BackendUnavailable& e) {
    std::fprintf(stderr, "ssmcheck: nothing was checked: %s\n", e.what());
    return ssm::cli::kExitNothingRan;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssmcheck: error: %s\n", e.what());
    return ssm::cli::kExitBadInput;
  }
  return rc;
}
