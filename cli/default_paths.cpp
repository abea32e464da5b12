#include "cli/default_paths.h"

#include <filesystem>
#include <system_error>

#include "core/child_process.h"  // self_executable()

#ifndef SSMCHECK_FIXTURES_DIR
#define SSMCHECK_FIXTURES_DIR "fixtures"
#endif

namespace ssm::cli {

std::string default_data_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  try {
    const fs::path shared = self_executable().parent_path().parent_path() / "share" / "ssmcheck";
    if (fs::is_directory(shared / "traces", ec)) return shared.lexically_normal().string();
  } catch (const std::exception&) {
    // no /proc/self/exe: the build tree's default below
  }
  return SSMCHECK_FIXTURES_DIR;
}

std::string default_traces_dir() { return default_data_dir() + "/traces"; }

}  // namespace ssm::cli
