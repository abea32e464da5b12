// What dumps and traces write alike about the model and the pool: the pool group (/pool:
// max_slots, h_capacity, conv_capacity, snapshot_slots) and the spec attributes of each model
// layer group (/model/layer<l>: kind, nk, nv, kd, vd, d_conv, conv_bias, output_gate, eps), and the
// check that an object carries no attribute the format does not define (only_attrs).
// Schemas: docs/dump-format.md, docs/trace-format.md. Users: formats/dump.cpp, formats/trace.cpp.
// Writers throw h5::Error; readers throw FormatError (formats/format_error.h), named by the
// object ("/pool@h_capacity", "/model/layer0@eps").
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "formats/checked_file.h"

namespace ssm::formats {

// Bounds that keep a malformed file from asking for absurd allocations.
// Pool and head bounds are core's (core/model.h, core/layer_spec.h): what a reader accepts, the
// capture ABI and every backend accept too.
constexpr int64_t kMaxLayers = 4096, kMaxSlots = kMaxPoolSlots, kMaxDim = kMaxHeads, kMaxK = kMaxIntermediates;
constexpr int64_t kMaxElems = int64_t(1) << 31;

// The root attribute h_mode of the open file `f`.
HMode read_h_mode_attr(const CheckedReader& r, hid_t f);

// The attributes of the pool group `g` (h_capacity only when max_slots > 0).
void write_pool_attrs(hid_t g, const PoolConfig& pool);
// Reads them into `pool` (h_mode untouched); `g` is the open group /pool.
void read_pool_attrs(const CheckedReader& r, hid_t g, PoolConfig& pool);

// The spec attributes of the layer group `g`, and its name (informational, not read back).
void write_layer_spec_attrs(hid_t g, const LayerSpec& s);
// Reads, validates and bounds them; `g` is the open group at `path` ("/model/layer0"). An
// absent output_gate is silu when output_gate_optional, an error otherwise.
LayerSpec read_layer_spec_attrs(const CheckedReader& r, hid_t g, const std::string& path,
                                bool output_gate_optional);

// The attributes of the object `loc` at `path` must be among `defined` (exact names): any other is
// refused naming it, "/model/layer0@gate: not a member of /model/layer0 (defined: ...); did you mean
// gates?", and a layer's convention put on another group says where it belongs. The format defines
// every member, so a misspelt attribute must not be ignored silently (docs/trace-format.md).
void only_attrs(const CheckedReader& r, hid_t loc, const std::string& path, const std::vector<std::string>& defined);
// The attributes a /model/layer<l> group of `kind` may carry (write_layer_spec_attrs writes them).
std::vector<std::string> layer_spec_attr_names(LayerKind kind);
// The attributes of /pool.
const std::vector<std::string>& pool_attr_names();

}  // namespace ssm::formats
