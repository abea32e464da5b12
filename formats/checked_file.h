// HDF5 files whose every failure names the file and the object: FormatError(file, object, what)
// (formats/format_error.h), "FILE: OBJECT: what". OBJECT is an HDF5 path: "/" for the file
// itself, "/model/layer0" for a group or dataset, "/model/layer0@nk" for an attribute.
// CheckedReader reads (h5::Error and out-of-range values become FormatError), write_atomically
// writes by the outputs rule (formats/output_file.h: an exclusive temporary renamed into place),
// errors_as turns whatever else escapes into FormatError. Users: formats/dump.cpp and
// formats/trace.cpp (their readers derive from CheckedReader), formats/model_attrs.cpp.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fmt/core.h>
#include <string>
#include <system_error>
#include <utility>

#include "formats/file_version.h"
#include "formats/format_error.h"
#include "formats/hdf5_file.h"
#include "formats/output_file.h"

namespace ssm::formats {

// The metadata cache of a file being read, fixed. HDF5's default one adapts, growing when its hit
// rate falls, and it holds decoded object headers at about 30 times the bytes it counts: replaying
// a 2,000-op trace (a state after every op) peaked at 80 MiB with it, 137 with 4 MiB fixed, 50 with
// 1 MiB and 27 with this, no slower (5.2-6.3 s of CPU against 5.7-6.6; docs/trace-format.md
// "Scaling"). A reader touches each op's objects once, in order, so they have no reuse to cache;
// what it reuses, the /ops group's index, costs a head the same at 10^4 and 10^6 ops (0.13-0.15
// ms, 256 KiB or 32 MiB: docs/trace-format.md "Scaling").
constexpr size_t kReaderMetadataCacheBytes = size_t(256) << 10;

class CheckedReader {
 public:
  explicit CheckedReader(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  // Opens file() read-only once it is known to be a non-empty regular file with the HDF5
  // signature; `kind` ("dump", "trace") ends the empty-file message.
  h5::Handle open(const char* kind) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto st = fs::status(file_, ec);
    if (ec || !fs::exists(st)) throw FormatError(file_, "/", "no such file");
    if (!fs::is_regular_file(st)) throw FormatError(file_, "/", "not a regular file");
    const auto size = fs::file_size(file_, ec);
    if (!ec && size == 0) throw FormatError(file_, "/", std::string("empty file (0 bytes), not an HDF5 ") + kind);
    h5::silence_errors();
    if (H5Fis_hdf5(file_.c_str()) <= 0) {
      h5::error_stack();  // clear
      throw FormatError(file_, "/", "not an HDF5 file (no HDF5 signature)");
    }
    h5::Handle f = guard("/", [&] { return h5::open_file(file_); });
    guard("/", [&] { h5::bound_metadata_cache(f, kReaderMetadataCacheBytes); });
    return f;
  }

  // Runs f, turning h5::Error into FormatError(file, obj, ...).
  template <class F>
  auto guard(const std::string& obj, F f) const -> decltype(f()) {
    try {
      return f();
    } catch (const h5::Error& e) {
      throw FormatError(file_, obj, e.what());
    }
  }

  static std::string at(const std::string& path, const std::string& name) {
    return path + "@" + name;  // "/@format", "/model/layer0@nk"
  }
  static std::string join(const std::string& path, const std::string& name) {
    return (path == "/" ? "/" : path + "/") + name;
  }

  std::string str_attr(hid_t loc, const std::string& path, const std::string& name) const {
    return guard(at(path, name), [&] { return h5::read_attr_string(loc, name); });
  }
  bool has_attr(hid_t loc, const std::string& path, const std::string& name) const {
    return guard(at(path, name), [&] { return h5::attr_exists(loc, name); });
  }
  // "" when absent.
  std::string opt_str_attr(hid_t loc, const std::string& path, const std::string& name) const {
    return has_attr(loc, path, name) ? str_attr(loc, path, name) : "";
  }
  // An integer attribute inside [lo, hi].
  int64_t int_attr(hid_t loc, const std::string& path, const std::string& name, int64_t lo, int64_t hi) const {
    const int64_t v = guard(at(path, name), [&] { return h5::read_attr_int(loc, name); });
    if (v < lo || v > hi) throw FormatError(file_, at(path, name), fmt::format("value {} outside [{}, {}]", v, lo, hi));
    return v;
  }

  // The root attribute format of the open file `f` must be `format`, and its version one of
  // `versions` (formats/file_version.h); returns the version, on which the reader dispatches.
  int64_t check_format(hid_t f, const std::string& format, const FileVersions& versions) const {
    const std::string found = str_attr(f, "/", "format");
    if (found != format) throw FormatError(file_, "/@format", "is '" + found + "', expected '" + format + "'");
    const int64_t v = int_attr(f, "/", "version", INT64_MIN, INT64_MAX);
    const std::string why = versions.cannot_read(v);
    if (!why.empty()) throw FormatError(file_, "/@version", why);
    return v;
  }

  bool exists(hid_t loc, const std::string& path, const std::string& name) const {
    return guard(join(path, name), [&] { return h5::link_exists(loc, name); });
  }
  // The group `name` of `loc` (at `path`); an empty handle when absent and not required.
  h5::Handle group(hid_t loc, const std::string& path, const std::string& name, bool required = true) const {
    const std::string full = join(path, name);
    if (!exists(loc, path, name)) {
      if (!required) return h5::Handle();
      throw FormatError(file_, full, "missing group");
    }
    h5::Handle g = guard(full, [&] { return h5::open_if(loc, name, H5I_GROUP); });
    if (g.id() < 0) throw FormatError(file_, full, "is not a group");
    return g;
  }

 protected:
  std::string file_;
};

// Runs f; FormatError passes through, h5::Error and any other std::exception become
// FormatError(file, obj, ...), the latter as "unexpected: ...". For the entry points, so that
// nothing else escapes them.
template <class F>
auto errors_as(const std::string& file, const std::string& obj, F f) -> decltype(f()) {
  try {
    return f();
  } catch (const FormatError&) {
    throw;
  } catch (const h5::Error& e) {
    throw FormatError(file, obj, e.what());
  } catch (const std::exception& e) {
    throw FormatError(file, obj, std::string("unexpected: ") + e.what());
  }
}

// Writes an HDF5 file to `path` by the outputs rule (formats/output_file.h): body(file, part)
// fills a file created exclusively under a temporary name, for part = 0 .. parts-1 with the file
// closed and reopened (h5::reopen_file) between parts, which is then renamed over a regular file (a
// crash never leaves a half file at `path`; a symlink is kept and its target replaced) or copied
// through to a device or FIFO (never replaced). Each close drops what HDF5 holds in memory for the
// open file (the sections of its free-space manager, which grow with what the writing frees), so a
// body that writes without bound in parts of bounded size stays flat in memory (TraceWriter::close);
// a part must close every object it opens. The temporary is removed on any failure; an h5::Error
// from body becomes FormatError(path, obj, "writing failed: ..."), a failure to place the file
// FormatError(path, "/", ...).
template <class Body>
void write_atomically_in_parts(const std::string& path, const std::string& obj, int parts, Body body) {
  try {
    files::write_output_with(path, [&](const std::string& tmp) {
      try {
        h5::Handle f = h5::create_file(tmp, /*exclusive=*/true);
        for (int part = 0; part < parts; ++part) {
          if (part > 0) f = h5::reopen_file(tmp);
          body(hid_t(f), part);
          f.close("close " + tmp);
        }
      } catch (const h5::Error& e) {
        throw FormatError(path, obj, std::string("writing failed: ") + e.what());
      }
    });
  } catch (const files::OutputError& e) {
    throw FormatError(path, "/", e.what());
  }
}

// write_atomically_in_parts in one part: body(file) fills the file.
template <class Body>
void write_atomically(const std::string& path, const std::string& obj, Body body) {
  write_atomically_in_parts(path, obj, 1, [&](hid_t f, int) { body(f); });
}

}  // namespace ssm::formats
