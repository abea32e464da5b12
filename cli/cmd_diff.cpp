// `ssmcheck diff`: placeholder until compare/ lands (issue 3).
#include "cli/commands.h"
namespace ssm::cli {
void add_diff_command(CLI::App&, int*) {}
}  // namespace ssm::cli
