// Outputs never clobber: the one rule by which every output file ssmcheck writes whole (verdicts,
// reports, dumps, traces, a campaign's failing case) reaches its path. Users: cli/output_path.cpp,
// cli/crash_verdict.cpp, formats/checked_file.h (HDF5), fuzz/campaign.cpp.
//
// A regular file, or a path where nothing is yet, is replaced atomically: the bytes go to a
// temporary created exclusively beside it (O_CREAT|O_EXCL|O_NOFOLLOW, an unpredictable name
// PATH.tmp-XXXXXXXXXXXX, so a symlink planted there is never followed), are fsync'ed and closed
// with every error checked (ENOSPC), and only then renamed over PATH; on any failure the
// temporary is removed and PATH is left as it was. A symlink is kept: its final target is written
// by the same rule. A character or block device or a FIFO (directly or through symlinks) is
// written through: opened for writing without O_CREAT, never replaced (`--json /dev/null` leaves
// /dev/null a device, as `gcc -o /dev/null` does). A directory, a socket, a symlink loop:
// OutputError.
#pragma once
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ssm::files {

// What went wrong, without the path (callers name the path and the flag): "No space left on
// device", "is a directory", ...
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Placement { replace, through };

struct OutputTarget {
  Placement placement = Placement::replace;
  // replace: the file to replace (a symlink's final target, which may not exist yet);
  // through: the device or FIFO.
  std::string path;
  bool exists = false;  // something is at path now
};

// Where output `path` goes (no file is touched). Throws OutputError.
OutputTarget resolve_output(const std::string& path);

// An unpredictable temporary name beside `path`: path + ".tmp-" + 12 random letters and digits.
std::string temporary_name(const std::string& path);

// Writes `bytes` to `path` by the rule above. Throws OutputError.
void write_output(const std::string& path, std::string_view bytes);

// For a writer that creates its file by name (HDF5): make(tmp) must create tmp exclusively (fail
// when anything is there: HDF5's H5F_ACC_EXCL opens with O_CREAT|O_EXCL, which never follows a
// symlink) and write it completely. Replace: tmp is beside the target, then fsync'ed and renamed
// over it. Through: tmp is in the temporary directory, then copied through to the device and
// removed. An exception from make passes through after tmp is removed; other failures throw
// OutputError.
void write_output_with(const std::string& path, const std::function<void(const std::string& tmp)>& make);

// Whether a file can be created in `dir` ("" = "."): an exclusive temporary created and removed
// at once. On failure *why says why.
bool can_create_in(const std::string& dir, std::string* why);

// For a signal handler (cli/crash_verdict.cpp): the target and the temporary name decided
// beforehand, then written with nothing but async-signal-safe system calls. Returns 0 or errno.
struct PreparedOutput {
  OutputTarget target;
  std::string temp;  // replace: the temporary name to create
};
PreparedOutput prepare_output(const std::string& path);  // throws OutputError
int write_prepared(const PreparedOutput& p, const char* data, size_t size) noexcept;

}  // namespace ssm::files
