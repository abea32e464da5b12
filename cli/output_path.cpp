// Output paths checked before any work (see output_path.h).
#include "cli/output_path.h"

#include "formats/output_file.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ssm::cli {

namespace fs = std::filesystem;

namespace {
void make_dir(const fs::path& dir, const std::string& flag, const std::string& path) {
  std::error_code ec;
  if (dir.empty() || fs::is_directory(dir, ec)) return;
  if (fs::exists(dir, ec))
    throw std::invalid_argument(flag + " " + path + ": " + dir.string() + " exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw std::invalid_argument(flag + " " + path + ": cannot create directory " + dir.string() + ": " + ec.message());
  fmt::print(stderr, "ssmcheck: created directory {} for {}\n", dir.string(), flag);
}

// A file can be created in dir: probed with an exclusive temporary (output_file.h), removed at once.
void check_writable_dir(const fs::path& dir, const std::string& flag, const std::string& path) {
  std::string why;
  if (!files::can_create_in(dir.string(), &why))
    throw std::invalid_argument(flag + " " + path + ": cannot write in " + (dir.empty() ? "." : dir.string()) + ": " + why);
}
}  // namespace

void prepare_output_file(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  files::OutputTarget t;
  try {
    t = files::resolve_output(path);
  } catch (const files::OutputError& e) {
    throw std::invalid_argument(flag + " " + path + ": " + e.what());
  }
  if (t.placement == files::Placement::through) {  // a device or FIFO: written through, never replaced
    if (::access(t.path.c_str(), W_OK) != 0)
      throw std::invalid_argument(flag + " " + path + ": cannot write (permission denied)");
    return;
  }
  const fs::path p(t.path);  // a symlink's final target: the file that will be replaced
  make_dir(p.parent_path(), flag, path);
  if (t.exists && ::access(t.path.c_str(), W_OK) != 0)
    throw std::invalid_argument(flag + " " + path + ": cannot write (permission denied)");
  check_writable_dir(p.parent_path(), flag, path);
}

void prepare_output_dir(const std::string& dir, const std::string& flag) {
  if (dir.empty()) return;
  make_dir(fs::path(dir), flag, dir);
  check_writable_dir(fs::path(dir), flag, dir);
}

namespace {
int g_stdout_fd = 1;  // where "-" writes: the real stdout, once reserve_stdout_for did its redirection
}  // namespace

void reserve_stdout_for(const std::string& path) {
  if (path != "-" || g_stdout_fd != 1) return;
  std::fflush(stdout);
  const int saved = ::dup(1);
  if (saved < 0 || ::dup2(2, 1) < 0) return;  // nothing to gain: stdout stays shared
  g_stdout_fd = saved;
}

void write_text_atomically(const std::string& path, const std::string& text, const std::string& flag) {
  if (path == "-") {
    std::fflush(stdout);
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
      const ssize_t n = ::write(g_stdout_fd, p, left);
      if (n <= 0) throw std::invalid_argument(flag + " -: cannot write to stdout");
      p += n;
      left -= size_t(n);
    }
    return;
  }
  try {
    files::write_output(path, text);
  } catch (const files::OutputError& e) {
    throw std::invalid_argument(flag + " " + path + ": " + e.what());
  }
}

std::string resolve_ops(const std::string& ops) {
  if (ops.empty() || ops[0] != '@') return ops;
  const std::string file = ops.substr(1);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument("--ops " + ops + ": cannot read " + file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void check_output_dir(const std::string& dir, const std::string& flag) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir), ec);
  if (fs::exists(p, ec) && !fs::is_directory(p, ec))
    throw std::invalid_argument(flag + " " + dir + ": exists and is not a directory");
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();  // the nearest existing ancestor
  if (!fs::is_directory(p, ec) || ::access(p.c_str(), W_OK) != 0)
    throw std::invalid_argument(flag + " " + dir + ": cannot be created (" + p.string() + " is not writable)");
}

}  // namespace ssm::cli
