// `ssmcheck backends [NAME...]`: the backends this build knows, whether each can run here and why
// not, and for each NAME given (a built-in or plugin:PATH.so[,key=value...]) whether it loads,
// what it declares and how it is judged. Exit 2 when a NAME given cannot be used.
#include <fmt/core.h>

#include "cli/backend_registry.h"
#include "cli/commands.h"

namespace ssm::cli {

namespace {

const char* strictness_name(cmp::Strictness s) {
  return s == cmp::Strictness::bitwise ? "bitwise" : "tolerance classes";
}

int run_backends(const std::vector<std::string>& names) {
  for (const auto& [e, why] : builtin_backends()) {
    fmt::print("{:<10} {}\n", e.name, why.empty() ? "available" : "unavailable: " + why);
    fmt::print("{:<10} {}; judged against the {} ({})\n", "", e.summary, e.model_name, strictness_name(e.strictness));
    fmt::print("{:<10} runs: {}\n", "", e.caps.text());
  }
  fmt::print("{:<10} {}\n", "plugin:",
             "PATH.so[,key=value...]: an implementation of plugin/ssmcheck_plugin.h, in its "
             "own process (docs/plugins.md)");
  fmt::print("{:<10} {}\n", "python:",
             "NAME: a Python class, through ssmcheck.run(args, Class) (python/ssmcheck, "
             "docs/plugins.md \"Python\")");
  fmt::print("{:<10} {}\n", "perturbed:",
             "NAME: NAME with its schedule perturbed (blocks in seeded orders over several waves, copies "
             "delayed), where it offers that: cuda (docs/cuda.md \"Perturbed schedules\")");
  int rc = kExitOk;
  for (const std::string& n : names) {
    try {
      const fuzz::BackendEntry e = find_backend(n);
      fmt::print("\n{}: usable; {}; judged against the {} ({})\n  runs: {}\n", n, e.summary, e.model_name,
                 strictness_name(e.strictness), e.caps.text());
    } catch (const std::exception& ex) {
      fmt::print("\n{}: NOT usable: {}\n", n, ex.what());
      rc = kExitBadInput;
    }
  }
  return rc;
}

}  // namespace

void add_backends_command(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("backends", "list the backends, whether each can run here, and check plug-ins");
  auto names = std::make_shared<std::vector<std::string>>();
  cmd->add_option("names", *names, "backends to check, e.g. plugin:./libmine.so,key=value (loads and creates it)");
  cmd->callback([=] { *rc = run_backends(*names); });
}

}  // namespace ssm::cli
