// `--html FILE` on replay, diff, fuzz, check and gate, and the `report` subcommand: one
// self-contained HTML page (report/html_page.h, docs/report.md) written like every other
// output file (cli/output_path.h): checked before any work, written atomically at the end.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "report/html_page.h"

namespace ssm::cli {

struct HtmlOption {
  std::string path;
  void add_to(CLI::App* cmd, const std::string& what);
  bool any() const { return !path.empty(); }
  void prepare() const;                     // before any work
  void write(const report::Page& page) const;  // prints where it went (stderr)
};

}  // namespace ssm::cli
