// Subcommands of the ssmcheck command line tool, one file each (cli/cmd_<name>.cpp).
// Exit codes shared by every subcommand: 0 ok / equal, 1 different / diverged, 2 bad input,
// 5 nothing was checked (as pytest: a run that checked nothing is not a pass).
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace ssm::cli {

constexpr int kExitOk = 0, kExitDiffer = 1, kExitBadInput = 2, kExitNothingRan = 5;

// A finite number of seconds > 0 (NaN, inf and negatives are refused, naming the flag).
const CLI::Validator& finite_seconds();  // main.cpp
// For a command line CLI11 refused: "unknown subcommand 'replya' (did you mean 'replay'?)" or
// the same for a flag of the subcommand; "" when neither applies (main.cpp).
std::string did_you_mean(const CLI::App& app, int argc, char** argv);

// Each add_* registers a subcommand; the callback stores the subcommand's exit code in *rc.
void add_run_command(CLI::App& app, int* rc);   // cmd_run.cpp
void add_dump_command(CLI::App& app, int* rc);  // cmd_dump.cpp
void add_diff_command(CLI::App& app, int* rc);  // cmd_diff.cpp
void add_fuzz_command(CLI::App& app, int* rc);   // cmd_fuzz.cpp
void add_check_command(CLI::App& app, int* rc);  // cmd_fuzz.cpp
void add_record_command(CLI::App& app, int* rc);  // cmd_record.cpp
void add_replay_command(CLI::App& app, int* rc);  // cmd_replay.cpp
void add_approve_command(CLI::App& app, int* rc);  // cmd_approve.cpp
void add_gate_command(CLI::App& app, int* rc);    // cmd_gate.cpp
void add_mutants_command(CLI::App& app, int* rc);  // cmd_mutants.cpp
void add_backends_command(CLI::App& app, int* rc);  // cmd_backends.cpp
void add_report_command(CLI::App& app, int* rc);    // cmd_report.cpp
void add_reduce_command(CLI::App& app, int* rc);    // cmd_reduce.cpp

}  // namespace ssm::cli
