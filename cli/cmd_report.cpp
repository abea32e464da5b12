// `ssmcheck report --bench BENCH.json --html OUT.html`: draws saved results that no other
// subcommand produces in-process: the JSON of `ssmcheck_bench --json` (bandwidth against batch
// per op, against the copy ceiling). Replays, diffs, campaigns and the gate draw their own
// reports with --html (cli/html_option.h).
#include <fmt/core.h>

#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/html_option.h"
#include "report/sections.h"

namespace ssm::cli {

namespace {

struct ReportFlags {
  std::vector<std::string> bench;
  HtmlOption html;
};

int run_report(const ReportFlags& f) {
  f.html.prepare();
  report::Page page;
  page.title = "ssmcheck benchmark";
  page.subtitle = "ssmcheck report --bench";
  for (const std::string& path : f.bench) {
    std::ifstream in(path);
    if (!in) {
      fmt::print(stderr, "ssmcheck report: cannot read {}\n", path);
      return kExitBadInput;
    }
    std::stringstream text;
    text << in.rdbuf();
    try {
      const nlohmann::json j = nlohmann::json::parse(text.str());
      page.add(report::bandwidth_section(j, path));
      page.subtitle += " " + path;
    } catch (const nlohmann::json::exception& e) {
      fmt::print(stderr, "ssmcheck report: {}: not JSON: {}\n", path, e.what());
      return kExitBadInput;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "ssmcheck report: {}\n", e.what());
      return kExitBadInput;
    }
  }
  f.html.write(page);
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("report", "draw saved benchmark results as a self-contained HTML page");
  auto f = std::make_shared<ReportFlags>();
  cmd->add_option("--bench", f->bench, "JSON written by ssmcheck_bench --json (docs/report.md)")->required();
  f->html.add_to(cmd, "bandwidth against batch per op");
  cmd->get_option("--html")->required();
  cmd->callback([=] { *rc = run_report(*f); });
}

}  // namespace ssm::cli
