// HDF5 state dumps: the full state of one or more sequences (every field, every layer), the
// layer specs, the pool / h mode and provenance. Schema: docs/dump-format.md. Counterparts:
// formats/dump.cpp (writer and validating reader), formats/hdf5_file.h (HDF5 wrapper),
// formats/model_attrs.h (the pool and layer-spec attributes, shared with traces),
// scripts/h5py_check.py (the same files from Python). The per-sequence group (seq<i>) is exported
// below for formats/trace.cpp, whose recorded states use the same layout.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/backend.h"
#include "core/state.h"
#include "formats/file_version.h"
#include "formats/format_error.h"

namespace ssm::formats {

constexpr int kDumpVersion = 1;  // what this build writes
// What it reads: every version ever written (formats/file_version.h: what keeps and what bumps it).
constexpr FileVersions kDumpVersions{1, kDumpVersion};
constexpr const char* kDumpFormat = "ssmcheck-dump";
const char* tool_version();  // the project version this binary was built from
// The identity of this very binary: "ssmcheck <version> exe:<FNV-1a 64 of the executable file>".
const std::string& build_id();
// What a trace records as the build of `b`'s states: b.numerics_id() (what determines its numerics:
// the same line on a rebuild of unchanged kernels), else build_id(). Replaying on the same backend
// and build is bitwise (replay/replay.h).
std::string build_id(const Backend& b);

// Any problem with a dump file is a FormatError (formats/format_error.h): "FILE: OBJECT: what",
// OBJECT an HDF5 path ("/" for the file itself, "/seq0/layer1/h" for a dataset,
// "/model/layer0@nk" for an attribute).

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
// counts vs last_verify_k, the staging blob vs h mode); throws FormatError naming `file` and the
// object. Non-finite values are checked only when check_finite.
void validate_dump(const Dump& dump, const std::string& file, bool check_finite);

// Writes by the outputs rule (formats/output_file.h): a file is replaced through an exclusive
// temporary renamed into place, so a crash never leaves a half file at PATH; a device is written
// through. Byte identical for identical content. Non-finite values are written as they are (evidence).
// Throws FormatError.
void write_dump(const std::string& path, const Dump& dump);

struct ReadOptions {
  bool allow_non_finite = false;  // NaN/Inf in a tensor is a FormatError unless set
};
// Reads and validates everything; never crashes on a malformed file: throws FormatError.
Dump read_dump(const std::string& path, const ReadOptions& options = {});

// ---------------------------------------------------------------------------------------------
// One sequence group (a dump's /seq<i>, a trace's /ops/NNNNNN/state/seq<N>): attributes seq,
// slot, last_verify_k; one group layer<l> per recorded layer, named by its model index l; and
// h_prefill_stage. `layers` lists the model layers held (ascending, in range); state.layers[j]
// is model layer layers[j] (a dump holds every layer: 0..L-1). `spec` is the whole model (the
// stage has stage_elems(spec) elements). The stage is required in f16-pool mode unless
// stage_optional, and never allowed in other modes.

// The layers 0..L-1 of `spec`: what a dump holds.
std::vector<int> all_layers(const ModelSpec& spec);

// Checks one sequence state (layer count, shapes, dtypes vs h_is_f16, intermediate counts vs
// last_verify_k, the stage vs `mode`); throws FormatError(file, path + "/layer<l>/..." etc.).
void validate_sequence(const SequenceState& state, const std::string& file, const std::string& path,
                       const ModelSpec& spec, HMode mode, const std::vector<int>& layers, bool stage_optional,
                       bool check_finite);

// Writes the group `name` under `loc`. The state must have passed validate_sequence; throws
// h5::Error (formats/hdf5_file.h) when HDF5 fails.
void write_sequence_group(hid_t loc, const std::string& name, int seq, const SequenceState& state,
                          const std::vector<int>& layers, const ModelSpec& spec);

// Reads and validates the sequence group `g` (already open), whose HDF5 path `path` names the
// error objects. Never crashes on a malformed group: throws FormatError(file, object, ...).
// DumpSequence::seq is the group's attribute, not checked against any name. Members beyond the
// layout are not looked at (a caller that forbids them checks itself).
DumpSequence read_sequence_group(hid_t g, const std::string& file, const std::string& path, const ModelSpec& spec,
                                 HMode mode, const std::vector<int>& layers, bool stage_optional,
                                 const ReadOptions& options);

}  // namespace ssm::formats
