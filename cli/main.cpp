// ssmcheck: command line entry point; subcommands live in cli/cmd_*.cpp.
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"ssmcheck: reference-and-verification harness for the recurrent state of hybrid LLMs"};
  app.require_subcommand(1);
  int rc = ssm::cli::kExitOk;
  ssm::cli::add_run_command(app, &rc);
  ssm::cli::add_dump_command(app, &rc);
  ssm::cli::add_diff_command(app, &rc);
  ssm::cli::add_fuzz_command(app, &rc);
  ssm::cli::add_check_command(app, &rc);
  ssm::cli::add_record_command(app, &rc);
  ssm::cli::add_replay_command(app, &rc);
  ssm::cli::add_gate_command(app, &rc);
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
