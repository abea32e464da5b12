// cli/html_option.h
#include "cli/html_option.h"

#include <fmt/core.h>

#include "cli/output_path.h"

namespace ssm::cli {

void HtmlOption::add_to(CLI::App* cmd, const std::string& what) {
  cmd->add_option("--html", path, "write a self-contained HTML report (" + what + "; docs/report.md)");
}

void HtmlOption::prepare() const { prepare_output_file(path, "--html"); }

void HtmlOption::write(const report::Page& page) const {
  if (path.empty()) return;
  write_text_atomically(path, page.html(), "--html");
  if (path != "-") fmt::print(stderr, "wrote the HTML report to {}\n", path);
}

}  // namespace ssm::cli
