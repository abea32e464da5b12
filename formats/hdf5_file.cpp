// RAII wrapper over the HDF5 C API (see hdf5_file.h).
#include "formats/hdf5_file.h"

#include <cstdlib>
#include <mutex>

namespace ssm::h5 {

namespace {

herr_t walk_cb(unsigned n, const H5E_error2_t* e, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n >= 4) return 0;  // the innermost few frames say enough
  if (!s->empty()) *s += "; ";
  *s += e->desc ? e->desc : "?";
  if (e->func_name) *s += std::string(" (") + e->func_name + ")";
  return 0;
}

Handle plist(hid_t cls, const std::string& what) { return Handle(H5Pcreate(cls), H5Pclose, what); }

// The file format objects are written in: 1.8 at the least (dense attribute storage), as create_file
// made it, for new objects of a reopened file as much as for the first ones. A writer's file is closed
// only with none of its objects open (H5F_CLOSE_SEMI: its close fails naming them instead of leaving
// the file open until they go), so that a closed file is closed, its bytes on disk, before it is
// renamed or reopened.
Handle writer_access_plist() {
  Handle fapl = plist(H5P_FILE_ACCESS, "file access plist");
  check(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST), "H5Pset_libver_bounds");
  check(H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI), "H5Pset_fclose_degree");
  return fapl;
}

Handle scalar_space() { return Handle(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate scalar"); }

void put_attr(hid_t loc, const std::string& name, hid_t file_type, hid_t mem_type, hid_t space, const void* v) {
  Handle a(H5Acreate2(loc, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
           "create attribute " + name);
  check(H5Awrite(a, mem_type, v), "write attribute " + name);
}

Handle open_attr(hid_t loc, const std::string& name) {
  if (!attr_exists(loc, name)) throw Error("missing attribute '" + name + "'");
  return Handle(H5Aopen(loc, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
}

// Attribute type class and number of elements (scalar: 1).
H5T_class_t attr_class(hid_t a, int64_t* elems, const std::string& name) {
  Handle t(H5Aget_type(a), H5Tclose, "type of attribute " + name);
  Handle sp(H5Aget_space(a), H5Sclose, "space of attribute " + name);
  const hssize_t n = H5Sget_simple_extent_npoints(sp);
  if (n < 0) throw Error("attribute '" + name + "' has no readable extent");
  *elems = n;
  return H5Tget_class(t);
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_ENUM: return "enum";
    case H5T_COMPOUND: return "compound";
    case H5T_ARRAY: return "array";
    default: return "other";
  }
}

// Opens attribute `name` and checks that it holds `lo`..`hi` elements of class `want`; `what`
// says what was expected ("one integer") in the error.
Handle open_attr_of(hid_t loc, const std::string& name, H5T_class_t want, const char* what, int64_t lo = 1,
                    int64_t hi = 1, int64_t* elems = nullptr) {
  Handle a = open_attr(loc, name);
  int64_t n = 0;
  const H5T_class_t c = attr_class(a, &n, name);
  if (c != want || n < lo || n > hi)
    throw Error("attribute '" + name + "' must be " + what + ", is " + class_name(c) + " with " + std::to_string(n) +
                " elements");
  if (elems) *elems = n;
  return a;
}

// One scalar attribute of class `want`, read as `mem_type` (HDF5 converts).
template <class T>
T read_scalar_attr(hid_t loc, const std::string& name, H5T_class_t want, const char* what, hid_t mem_type) {
  Handle a = open_attr_of(loc, name, want, what);
  T v = 0;
  check(H5Aread(a, mem_type, &v), "read attribute " + name);
  return v;
}

}  // namespace

void silence_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

std::string error_stack() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? "no HDF5 error detail" : s;
}

herr_t check(herr_t rc, const std::string& what) {
  if (rc < 0) throw Error(what + ": " + error_stack());
  return rc;
}

Handle::Handle(hid_t id, Closer closer, const std::string& what) : id_(id), closer_(closer) {
  if (id < 0) throw Error(what + ": " + error_stack());
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    closer_ = o.closer_;
    o.id_ = -1;
  }
  return *this;
}

void Handle::close(const std::string& what) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = -1;
  check(closer_(id), what);
}

void Handle::reset() {
  if (id_ >= 0 && closer_) closer_(id_);
  id_ = -1;
}

Handle half_type() {
  silence_errors();
  Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose, "H5Tcopy");
  check(H5Tset_fields(t, 15, 10, 5, 0, 10), "H5Tset_fields half");
  check(H5Tset_size(t, 2), "H5Tset_size half");
  check(H5Tset_ebias(t, 15), "H5Tset_ebias half");
  return t;
}

Handle create_file(const std::string& path, bool exclusive) {
  silence_errors();
  Handle fcpl = plist(H5P_FILE_CREATE, "file creation plist");
  check(H5Pset_obj_track_times(fcpl, 0), "H5Pset_obj_track_times");
  // the root group's attributes in dense storage (a fractal heap), so that one attribute may
  // exceed the 64 KiB of an object header (an op script of 20,000 ops is about 150 KiB); this
  // needs the HDF5 1.8 file format, which every HDF5 since 2008 (and h5py) reads
  check(H5Pset_attr_phase_change(fcpl, 0, 0), "H5Pset_attr_phase_change");
  Handle fapl = writer_access_plist();
  return Handle(H5Fcreate(path.c_str(), exclusive ? H5F_ACC_EXCL : H5F_ACC_TRUNC, fcpl, fapl), H5Fclose, "create " + path);
}

Handle reopen_file(const std::string& path) {
  silence_errors();
  Handle fapl = writer_access_plist();
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl), H5Fclose, "reopen " + path);
}

void bound_metadata_cache(hid_t file, size_t bytes) {
  H5AC_cache_config_t c{};
  c.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  check(H5Fget_mdc_config(file, &c), "H5Fget_mdc_config");
  c.set_initial_size = true;
  c.initial_size = c.min_size = c.max_size = bytes;
  c.incr_mode = H5C_incr__off;
  c.flash_incr_mode = H5C_flash_incr__off;
  c.decr_mode = H5C_decr__off;
  check(H5Fset_mdc_config(file, &c), "H5Fset_mdc_config");
}

Handle create_group(hid_t loc, const std::string& name) {
  Handle gcpl = plist(H5P_GROUP_CREATE, "group creation plist");
  check(H5Pset_obj_track_times(gcpl, 0), "H5Pset_obj_track_times");
  return Handle(H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, gcpl, H5P_DEFAULT), H5Gclose, "create group " + name);
}

void write_attr_str(hid_t loc, const std::string& name, const std::string& value) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy string");
  check(H5Tset_size(t, value.empty() ? 1 : value.size()), "H5Tset_size string");
  check(H5Tset_strpad(t, H5T_STR_NULLPAD), "H5Tset_strpad");
  check(H5Tset_cset(t, H5T_CSET_ASCII), "H5Tset_cset");
  std::string v = value.empty() ? std::string(1, '\0') : value;
  put_attr(loc, name, t, t, scalar_space(), v.data());
}

void write_attr_i64(hid_t loc, const std::string& name, int64_t value) {
  put_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, scalar_space(), &value);
}

void write_attr_u64(hid_t loc, const std::string& name, uint64_t value) {
  put_attr(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, scalar_space(), &value);
}

void write_attr_f32(hid_t loc, const std::string& name, float value) {
  put_attr(loc, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, scalar_space(), &value);
}

void write_attr_i64s(hid_t loc, const std::string& name, const std::vector<int64_t>& values) {
  if (values.empty()) throw Error("attribute " + name + ": empty integer array");
  const hsize_t n = values.size();
  Handle sp(H5Screate_simple(1, &n, nullptr), H5Sclose, "H5Screate_simple");
  put_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, sp, values.data());
}

Handle write_dataset(hid_t loc, const std::string& name, DType dtype, const std::vector<int64_t>& dims,
                     const void* data) {
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  Handle sp(H5Screate_simple(int(hd.size()), hd.data(), nullptr), H5Sclose, "dataspace of " + name);
  Handle dcpl = plist(H5P_DATASET_CREATE, "dataset creation plist");
  check(H5Pset_obj_track_times(dcpl, 0), "H5Pset_obj_track_times");
  Handle half = half_type();
  // f16: memory type == file type, so the bits we produced are stored untouched.
  const hid_t ftype = dtype == DType::f16 ? half.id() : H5T_IEEE_F32LE;
  const hid_t mtype = dtype == DType::f16 ? half.id() : H5T_NATIVE_FLOAT;
  Handle d(H5Dcreate2(loc, name.c_str(), ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
           "create dataset " + name);
  check(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset " + name);
  return d;
}

Handle open_file(const std::string& path) {
  silence_errors();
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "open");
}

bool link_exists(hid_t loc, const std::string& name) {
  return check(H5Lexists(loc, name.c_str(), H5P_DEFAULT), "H5Lexists " + name) > 0;
}

Handle open_if(hid_t loc, const std::string& name, H5I_type_t kind) {
  const bool dataset = kind == H5I_DATASET;
  const hid_t id = dataset ? H5Dopen2(loc, name.c_str(), H5P_DEFAULT) : H5Gopen2(loc, name.c_str(), H5P_DEFAULT);
  if (id >= 0) return Handle(id, dataset ? H5Dclose : H5Gclose, "");  // `what` names failures only
  // not opened: another kind of object, or one that is broken (then the error of opening it)
  const std::string why = error_stack();
  H5O_info_t info;
  if (H5Oget_info_by_name(loc, name.c_str(), &info, H5P_DEFAULT) >= 0 &&
      info.type != (dataset ? H5O_TYPE_DATASET : H5O_TYPE_GROUP))
    return Handle();
  throw Error((dataset ? "open dataset " : "open group ") + name + ": " + why);
}

Handle open_group(hid_t loc, const std::string& name) {
  return Handle(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), H5Gclose, "open group " + name);
}

Handle open_dataset(hid_t loc, const std::string& name) {
  return Handle(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
}

bool attr_exists(hid_t loc, const std::string& name) {
  return check(H5Aexists(loc, name.c_str()), "H5Aexists " + name) > 0;
}

namespace {
// Strings from a file are untrusted: bytes that are not valid UTF-8, and control characters other
// than newline and tab, become "\xNN", so that messages and reports that quote them stay
// printable text (a flipped byte in a producer name must not put raw bytes on a terminal or into
// JUnit XML).
std::string printable(const std::string& s) {
  std::string out;
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  auto hex = [&](unsigned char c) {
    static const char* digits = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  };
  for (size_t i = 0; i < n;) {
    const unsigned char c = u[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\n' && c != '\t') hex(c);
      else if (c == 0x7f) hex(c);
      else out += char(c);
      ++i;
      continue;
    }
    // the length of a well-formed UTF-8 sequence starting with c (0: not a lead byte)
    const size_t len = (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (u[i + k] & 0xc0) == 0x80;
    if (ok && len == 3) ok = !(c == 0xe0 && u[i + 1] < 0xa0) && !(c == 0xed && u[i + 1] > 0x9f);  // overlong, surrogates
    if (ok && len == 4) ok = !(c == 0xf0 && u[i + 1] < 0x90) && !(c == 0xf4 && u[i + 1] > 0x8f);
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      hex(c);
      ++i;
    }
  }
  return out;
}
}  // namespace

namespace {
// The bytes as stored (read_attr_string escapes them).
std::string read_attr_string_raw(hid_t loc, const std::string& name) {
  Handle a = open_attr_of(loc, name, H5T_STRING, "one string");
  Handle ft(H5Aget_type(a), H5Tclose, "type of attribute " + name);
  const htri_t var = check(H5Tis_variable_str(ft), "H5Tis_variable_str");
  Handle mt(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  check(H5Tset_cset(mt, H5Tget_cset(ft)), "H5Tset_cset");
  if (var > 0) {
    check(H5Tset_size(mt, H5T_VARIABLE), "H5Tset_size variable");
    char* p = nullptr;
    check(H5Aread(a, mt, &p), "read attribute " + name);
    std::string s = p ? p : "";
    if (p) H5free_memory(p);
    return s;
  }
  const size_t size = H5Tget_size(ft);
  if (size == 0 || size > (1u << 20)) throw Error("attribute '" + name + "': bad string size");
  check(H5Tset_size(mt, size), "H5Tset_size");
  check(H5Tset_strpad(mt, H5Tget_strpad(ft)), "H5Tset_strpad");
  std::string buf(size, '\0');
  check(H5Aread(a, mt, buf.data()), "read attribute " + name);
  buf.resize(std::min(buf.find('\0'), buf.size()));
  while (!buf.empty() && buf.back() == ' ') buf.pop_back();
  return buf;
}
}  // namespace

std::string read_attr_string(hid_t loc, const std::string& name) {
  return printable(read_attr_string_raw(loc, name));
}


int64_t read_attr_int(hid_t loc, const std::string& name) {
  return read_scalar_attr<int64_t>(loc, name, H5T_INTEGER, "one integer", H5T_NATIVE_INT64);
}

uint64_t read_attr_u64(hid_t loc, const std::string& name) {
  return read_scalar_attr<uint64_t>(loc, name, H5T_INTEGER, "one integer", H5T_NATIVE_UINT64);
}

double read_attr_float(hid_t loc, const std::string& name) {
  return read_scalar_attr<double>(loc, name, H5T_FLOAT, "one float", H5T_NATIVE_DOUBLE);
}

std::vector<int64_t> read_attr_ints(hid_t loc, const std::string& name) {
  int64_t n = 0;
  Handle a = open_attr_of(loc, name, H5T_INTEGER, "an array of integers", 1, 1 << 20, &n);
  std::vector<int64_t> v(size_t(n), 0);
  check(H5Aread(a, H5T_NATIVE_INT64, v.data()), "read attribute " + name);
  return v;
}

DatasetInfo dataset_info(hid_t dset) {
  DatasetInfo info;
  Handle sp(H5Dget_space(dset), H5Sclose, "dataspace");
  const int rank = check(H5Sget_simple_extent_ndims(sp), "rank");
  std::vector<hsize_t> d(size_t(rank), 0);
  if (rank > 0) check(H5Sget_simple_extent_dims(sp, d.data(), nullptr), "dims");
  info.dims.assign(d.begin(), d.end());
  Handle t(H5Dget_type(dset), H5Tclose, "datatype");
  const H5T_class_t c = H5Tget_class(t);
  const size_t size = H5Tget_size(t);
  info.type_text = std::string(class_name(c)) + " " + std::to_string(size) + " bytes";
  if (c == H5T_FLOAT) {
    size_t spos, epos, esize, mpos, msize;
    check(H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize), "H5Tget_fields");
    const size_t ebias = H5Tget_ebias(t);
    const H5T_order_t order = H5Tget_order(t);
    info.is_f32 = size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && ebias == 127;
    info.is_f16 = size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && ebias == 15 &&
                  order == H5T_ORDER_LE;
    if (size == 2 && !info.is_f16) info.type_text += " (not IEEE half little endian)";
  }
  return info;
}

void read_dataset(hid_t dset, DType dtype, void* out) {
  if (dtype == DType::f16) {
    Handle half = half_type();
    check(H5Dread(dset, half, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "read");
  } else {
    check(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out), "read");
  }
}

}  // namespace ssm::h5
