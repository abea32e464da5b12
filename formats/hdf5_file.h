// A small RAII layer over the HDF5 1.10 C API: handles close themselves, every return is
// checked, and a failure becomes h5::Error carrying HDF5's error stack (H5Ewalk2) as text.
// FP16 uses the IEEE-half type built as h5py builds it; half data is written and read with
// memory type == file type, so HDF5 never converts float <-> half. Users: formats/checked_file.h,
// formats/model_attrs.cpp, formats/dump.cpp, formats/trace.cpp and the bad-file tests.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ssm::h5 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Turns the automatic error printer off (once) and returns the current error stack as text.
void silence_errors();
std::string error_stack();
// Throws Error("what: <stack>") when rc < 0 / id < 0.
herr_t check(herr_t rc, const std::string& what);

// An owned hid_t; the closer matches its kind (file, group, dataset, ...).
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer, const std::string& what);  // throws on id < 0
  Handle(Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t id() const { return id_; }
  operator hid_t() const { return id_; }
  void close(const std::string& what);  // checked close (files: flushes)
  void reset();

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

Handle half_type();  // IEEE binary16, little endian, as h5py's float16

// Writing. Creation property lists turn object time tracking off: same content, same bytes.
// exclusive: fail when anything is at path (O_CREAT|O_EXCL, never following a symlink), else truncate.
Handle create_file(const std::string& path, bool exclusive = false);
// Opens a file create_file made (and its owner closed) for writing more into it, in the same format.
Handle reopen_file(const std::string& path);
// Holds `file`'s metadata cache at `bytes` (HDF5's default lets it grow adaptively to 32 MiB, whose
// entries cost about twice that in memory): for a writer that adds many objects to one file, so
// that its memory does not follow the count of objects.
void bound_metadata_cache(hid_t file, size_t bytes);
Handle create_group(hid_t loc, const std::string& name);
void write_attr_str(hid_t loc, const std::string& name, const std::string& value);  // fixed-length ASCII
void write_attr_i64(hid_t loc, const std::string& name, int64_t value);
void write_attr_u64(hid_t loc, const std::string& name, uint64_t value);
void write_attr_f32(hid_t loc, const std::string& name, float value);
void write_attr_i64s(hid_t loc, const std::string& name, const std::vector<int64_t>& values);
// data: dims elements of dtype (f16: raw half bits). Returns the dataset for more attributes.
Handle write_dataset(hid_t loc, const std::string& name, DType dtype, const std::vector<int64_t>& dims,
                     const void* data);

// Reading.
Handle open_file(const std::string& path);  // read-only
bool link_exists(hid_t loc, const std::string& name);
// The object `name` of `loc` when it is a `kind` (H5I_GROUP or H5I_DATASET), else an empty
// handle. Opened first, its type asked only when that fails: asking first (H5Oget_info, which
// decodes the whole object header) took a quarter of a replay's reading time, and H5Oopen finds
// the object's class by trying each (as much again).
Handle open_if(hid_t loc, const std::string& name, H5I_type_t kind);
Handle open_group(hid_t loc, const std::string& name);
Handle open_dataset(hid_t loc, const std::string& name);
bool attr_exists(hid_t loc, const std::string& name);
// Fixed or variable length. Untrusted text: invalid UTF-8 and control characters other than
// newline and tab come back as "\xNN".
std::string read_attr_string(hid_t loc, const std::string& name);
int64_t read_attr_int(hid_t loc, const std::string& name);         // any integer type
uint64_t read_attr_u64(hid_t loc, const std::string& name);
double read_attr_float(hid_t loc, const std::string& name);        // any float type
std::vector<int64_t> read_attr_ints(hid_t loc, const std::string& name);

struct DatasetInfo {
  std::vector<int64_t> dims;
  bool is_f32 = false;   // IEEE binary32, either byte order
  bool is_f16 = false;   // IEEE binary16, little endian
  std::string type_text;  // "float 4 bytes", "integer 8 bytes", ... for messages
};
DatasetInfo dataset_info(hid_t dset);
// Reads the whole dataset into out (sized by the caller: dims elements of dtype).
void read_dataset(hid_t dset, DType dtype, void* out);

}  // namespace ssm::h5
