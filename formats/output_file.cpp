// Outputs never clobber (see output_file.h): resolve the target, then replace it through an
// exclusive temporary or write through it.
#include "formats/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

namespace ssm::files {

namespace {

constexpr int kMaxLinks = 40;      // Linux's limit on symlinks followed in one lookup
constexpr int kNameAttempts = 100;  // temporary names tried before giving up

std::string errno_text(int e) { return std::strerror(e); }

// Every byte of [p, p+n) to fd (a short write continues, EINTR retries). 0 or errno.
int write_all(int fd, const char* p, size_t n) noexcept {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= size_t(w);
  }
  return 0;
}

int create_exclusive(const char* tmp) noexcept {
  return ::open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
}

// A device or FIFO: opened for writing as it is (no O_CREAT, no O_TRUNC), written, closed.
int write_through(const char* path, const char* p, size_t n) noexcept {
  const int fd = ::open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return errno;
  int e = write_all(fd, p, n);
  if (::close(fd) != 0 && e == 0) e = errno;
  return e;
}

// fd: the exclusively created temporary `tmp`. Writes, fsyncs, closes and renames it over
// `path`; removes it on any failure. 0 or errno.
int finish_replace(int fd, const char* tmp, const char* path, const char* p, size_t n) noexcept {
  int e = write_all(fd, p, n);
  if (e == 0 && ::fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && ::rename(tmp, path) != 0) e = errno;
  if (e != 0) ::unlink(tmp);
  return e;
}

std::string random_suffix() {
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[12];
  if (::getentropy(bytes, sizeof bytes) != 0) {
    std::random_device rd;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(rd());
  }
  std::string s;
  for (unsigned char b : bytes) s += kChars[b % 62];
  return s;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

}  // namespace

std::string temporary_name(const std::string& path) { return path + ".tmp-" + random_suffix(); }

OutputTarget resolve_output(const std::string& path) {
  if (path.empty()) throw OutputError("empty path");
  std::string p = path;
  for (int links = 0;; ++links) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      // nothing there (ENOTDIR: a component is a file; creating the temporary will say so)
      if (errno == ENOENT || errno == ENOTDIR) return OutputTarget{Placement::replace, p, false};
      throw OutputError(errno_text(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      if (links >= kMaxLinks) throw OutputError("too many levels of symbolic links");
      std::vector<char> buf(PATH_MAX + 1);
      const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size() - 1);
      if (n < 0) throw OutputError(errno_text(errno));
      const std::string to(buf.data(), size_t(n));
      p = (!to.empty() && to[0] == '/') ? to : dir_of(p) + to;
      continue;
    }
    if (S_ISREG(st.st_mode)) return OutputTarget{Placement::replace, p, true};
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode))
      return OutputTarget{Placement::through, p, true};
    if (S_ISDIR(st.st_mode)) throw OutputError("is a directory");
    throw OutputError(std::string(S_ISSOCK(st.st_mode) ? "is a socket" : "is not a file") +
                      ", neither a regular file nor a device or FIFO");
  }
}

void write_output(const std::string& path, std::string_view bytes) {
  const OutputTarget t = resolve_output(path);
  if (t.placement == Placement::through) {
    if (const int e = write_through(t.path.c_str(), bytes.data(), bytes.size()))
      throw OutputError("cannot write: " + errno_text(e));
    return;
  }
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const std::string tmp = temporary_name(t.path);
    const int fd = create_exclusive(tmp.c_str());
    if (fd < 0) {
      if (errno == EEXIST) continue;  // taken (by anything, a symlink too): another name
      throw OutputError("cannot create a temporary file beside it: " + errno_text(errno));
    }
    if (const int e = finish_replace(fd, tmp.c_str(), t.path.c_str(), bytes.data(), bytes.size()))
      throw OutputError("cannot write: " + errno_text(e));
    return;
  }
  throw OutputError("cannot create a temporary file beside it: every name tried was taken");
}

void write_output_with(const std::string& path, const std::function<void(const std::string& tmp)>& make) {
  const OutputTarget t = resolve_output(path);
  const bool through = t.placement == Placement::through;
  const std::string beside = through ? (std::filesystem::temp_directory_path() / "ssmcheck-output").string() : t.path;
  std::string tmp;
  for (int attempt = 0; attempt < kNameAttempts && tmp.empty(); ++attempt) {
    std::string name = temporary_name(beside);
    struct stat st;
    if (::lstat(name.c_str(), &st) != 0 && errno == ENOENT) tmp = std::move(name);
  }
  if (tmp.empty()) throw OutputError("cannot find a free temporary name beside " + beside);
  try {
    make(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // make created and wrote tmp: it must be the regular file it made (never a link)
  const int fd = ::open(tmp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  int e = fd < 0 ? errno : ::fstat(fd, &st) != 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
  if (e == 0 && !through && ::fsync(fd) != 0) e = errno;
  if (e == 0 && through) {
    const int out = ::open(t.path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (out < 0) e = errno;
    std::vector<char> buf(1 << 16);
    while (e == 0) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) e = errno;
      if (n <= 0) break;
      e = write_all(out, buf.data(), size_t(n));
    }
    if (out >= 0 && ::close(out) != 0 && e == 0) e = errno;
  }
  if (fd >= 0 && ::close(fd) != 0 && e == 0) e = errno;
  if (e == 0 && !through && ::rename(tmp.c_str(), t.path.c_str()) != 0) e = errno;
  if (through || e != 0) ::unlink(tmp.c_str());
  if (e != 0) throw OutputError("cannot write: " + errno_text(e));
}

bool can_create_in(const std::string& dir, std::string* why) {
  const std::string base = (dir.empty() ? std::string(".") : dir) + "/.ssmcheck-probe";
  for (int attempt = 0; attempt < kNameAttempts; ++attempt) {
    const std::string tmp = temporary_name(base);
    const int fd = create_exclusive(tmp.c_str());
    if (fd < 0) {
      if (errno == EEXIST) continue;
      if (why) *why = errno_text(errno);
      return false;
    }
    ::close(fd);
    ::unlink(tmp.c_str());
    return true;
  }
  if (why) *why = "every temporary name tried was taken";
  return false;
}

PreparedOutput prepare_output(const std::string& path) {
  PreparedOutput p;
  p.target = resolve_output(path);
  if (p.target.placement == Placement::replace) p.temp = temporary_name(p.target.path);
  return p;
}

int write_prepared(const PreparedOutput& p, const char* data, size_t size) noexcept {
  if (p.target.placement == Placement::through) return write_through(p.target.path.c_str(), data, size);
  const int fd = create_exclusive(p.temp.c_str());
  if (fd < 0) return errno;
  return finish_replace(fd, p.temp.c_str(), p.target.path.c_str(), data, size);
}

}  // namespace ssm::files
