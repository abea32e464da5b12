// HDF5 state dumps: the full state of one or more sequences (every field, every layer), the
// layer specs, the pool / h mode and provenance. Schema: docs/dump-format.md. Counterparts:
// compare/dump.cpp (writer and validating reader), compare/hdf5_file.h (HDF5 wrapper),
// scripts/h5py_check.py (the same files from Python).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/state.h"

namespace ssm::cmp {

constexpr int kDumpVersion = 1;
constexpr const char* kDumpFormat = "ssmcheck-dump";
const char* tool_version();  // the project version this binary was built from

// Any problem with a dump file: message "FILE: OBJECT: what", OBJECT an HDF5 path ("/" for
// the file itself, "/seq0/layer1/h" for a dataset, "/model/layer0@nk" for an attribute).
class DumpError : public std::runtime_error {
 public:
  DumpError(const std::string& file, const std::string& object, const std::string& what)
      : std::runtime_error(file + ": " + object + ": " + what), file_(file), object_(object) {}
  const std::string& file() const { return file_; }
  const std::string& object() const { return object_; }

 private:
  std::string file_, object_;
};

struct Provenance {
  std::string tool_version;  // filled by write_dump when empty
  std::string backend;       // "reference", "cuda", or an engine's name
  uint64_t seed = 0;
  int op_index = -1;         // index of the last op applied before the dump (-1: unknown)
  std::string ops;           // the op script (may be empty)
  std::string case_name;     // the string that reproduces the case (may be empty)
};

struct DumpSequence {
  int seq = 0;  // logical sequence of the script
  SequenceState state;
};

struct Dump {
  Provenance provenance;
  ModelSpec spec;
  PoolConfig pool;  // h_mode always meaningful; the rest as the writer knew it
  std::vector<DumpSequence> sequences;
};

// Checks a dump against its own spec (layer counts, shapes, dtypes vs h_is_f16, intermediate
// counts vs last_verify_k, the staging blob vs h mode); throws DumpError naming `file` and the
// object. Non-finite values are checked only when check_finite.
void validate_dump(const Dump& dump, const std::string& file, bool check_finite);

// Writes to "PATH.tmp-PID" and renames, so a crash never leaves a half file at PATH. Byte
// identical for identical content. Non-finite values are written as they are (evidence).
// Throws DumpError.
void write_dump(const std::string& path, const Dump& dump);

struct ReadOptions {
  bool allow_non_finite = false;  // NaN/Inf in a tensor is a DumpError unless set
};
// Reads and validates everything; never crashes on a malformed file: throws DumpError.
Dump read_dump(const std::string& path, const ReadOptions& options = {});

}  // namespace ssm::cmp
