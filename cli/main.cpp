// ssmcheck: command line entry point; subcommands live in cli/cmd_*.cpp.
#include <cmath>
#include <cstdio>
#include <string>
#include <exception>

#include "cli/commands.h"

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
}  // namespace ssm::cli

int main(int argc, char** argv) {
  CLI::App app{"ssmcheck: reference-and-verification harness for the recurrent state of hybrid LLMs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ssmcheck " SSMCHECK_VERSION);
  int rc = ssm::cli::kExitOk;
  ssm::cli::add_run_command(app, &rc);
  ssm::cli::add_dump_command(app, &rc);
  ssm::cli::add_diff_command(app, &rc);
  ssm::cli::add_fuzz_command(app, &rc);
  ssm::cli::add_check_command(app, &rc);
  ssm::cli::add_record_command(app, &rc);
  ssm::cli::add_replay_command(app, &rc);
  ssm::cli::add_gate_command(app, &rc);
  ssm::cli::add_mutants_command(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : ssm::cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ssmcheck: error: %s\n", e.what());
    return ssm::cli::kExitBadInput;
  }
  return rc;
}
