// `ssmcheck new c|python DIR`: writes a plug-in skeleton (cmd_new.cpp).
#pragma once
#include <CLI/CLI.hpp>

namespace ssm::cli {

void add_new_command(CLI::App& app, int* rc);

}  // namespace ssm::cli
