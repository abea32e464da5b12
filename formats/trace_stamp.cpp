// Re-stamping a trace's build (see trace_stamp.h).
#include "formats/trace_stamp.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "formats/format_error.h"
#include "formats/hdf5_file.h"
#include "formats/output_file.h"

namespace ssm::formats {

namespace {

// The bytes of `from` into `to`, created exclusively (never through a symlink).
void copy_exclusive(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) throw FormatError(from, "/", std::string("cannot read: ") + std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const int fd = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) throw files::OutputError(std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw files::OutputError(std::strerror(e));
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) throw files::OutputError(std::strerror(errno));
}

}  // namespace

void stamp_trace_build(const std::string& path, const std::string& build) {
  h5::silence_errors();
  try {
    files::write_output_with(path, [&](const std::string& tmp) {
      copy_exclusive(path, tmp);
      h5::Handle f(H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "open for writing");
      if (h5::attr_exists(f, "build")) h5::check(H5Adelete(f, "build"), "delete the attribute build");
      h5::write_attr_str(f, "build", build);
      f.close("close");
    });
  } catch (const FormatError&) {
    throw;
  } catch (const std::exception& e) {
    throw FormatError(path, "/@build", std::string("cannot re-stamp: ") + e.what());
  }
}

}  // namespace ssm::formats
