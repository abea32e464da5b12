// `ssmcheck dump`: placeholder until compare/ lands (issue 3).
#include "cli/commands.h"
namespace ssm::cli {
void add_dump_command(CLI::App&, int*) {}
}  // namespace ssm::cli
