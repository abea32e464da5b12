// Support for the tests that drive the ssmcheck binary and write files: a shell runner (exit
// code and merged output), shell quoting, and a temporary directory removed on destruction.
// Users: tests/compare_dump_test.cpp, tests/support/trace_support.h.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ssm::test {

struct Shell {
  int code = -1;
  std::string out;
};

// Runs `cmd` through the shell, stderr merged into stdout.
inline Shell sh(const std::string& cmd) {
  Shell r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string q(const std::string& s) { return "'" + s + "'"; }

// A fresh directory "<tmp>/<prefix>-XXXXXX", removed with its contents on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ssmcheck-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ssm::test
