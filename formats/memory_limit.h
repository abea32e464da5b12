// How much memory this process may use, for the code that sizes allocations from numbers it was
// given (a dump's geometry in formats/dump.cpp, the case flags in cli/case_options.cpp): asked for
// more, it refuses before allocating, naming the field or flag and this limit, instead of ending
// in std::bad_alloc or the OOM killer. The smallest of: the machine's physical memory, the cgroup's
// memory.max (cgroup v2, as a container sees it) and the address-space and data limits
// (ulimit -v, ulimit -d). Header-only.
#pragma once
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fmt/core.h>
#include <fstream>
#include <string>

namespace ssm::formats {

struct MemoryLimit {
  uint64_t bytes = UINT64_MAX;
  std::string what;          // "this machine's memory", "the cgroup's memory.max", "ulimit -v", "ulimit -d"
  std::string text() const;  // "23.4 GiB (this machine's memory)"
};

// "8.0 GiB", "512 KiB": sizes in messages.
inline std::string size_text(double bytes) {
  if (bytes >= double(uint64_t(1) << 30)) return fmt::format("{:.1f} GiB", bytes / double(uint64_t(1) << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  return fmt::format("{:.0f} KiB", bytes / 1024.0);
}

inline std::string MemoryLimit::text() const { return size_text(double(bytes)) + " (" + what + ")"; }

inline MemoryLimit memory_limit() {
  MemoryLimit m;
  const auto take = [&m](uint64_t b, const char* what) {
    if (b > 0 && b < m.bytes) m = MemoryLimit{b, what};
  };
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) take(uint64_t(pages) * uint64_t(page), "this machine's memory");
  std::ifstream cg("/sys/fs/cgroup/memory.max");  // "max" when unlimited: not a number, skipped
  uint64_t v = 0;
  if (cg >> v) take(v, "the cgroup's memory.max");
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) take(uint64_t(r.rlim_cur), "ulimit -v");
  if (::getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY) take(uint64_t(r.rlim_cur), "ulimit -d");
  if (m.what.empty()) m.what = "no limit known";
  return m;
}

}  // namespace ssm::formats
