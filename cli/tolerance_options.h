// --tolerance SPEC and --tolerance-file FILE.json, shared by every subcommand that compares.
// The command line overrides the file, which overrides the defaults (compare/tolerance.cpp).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "compare/compare.h"

namespace ssm::cli {

struct ToleranceOptions {
  std::string spec, file;
  void add_to(CLI::App* cmd);
  cmp::Tolerances resolve() const;  // throws std::invalid_argument naming the flag and the key
};

}  // namespace ssm::cli
