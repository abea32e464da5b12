// HDF5 state dumps: writer (temporary name, then rename) and a reader that validates every
// group, attribute, shape and dtype (see dump.h; schema in docs/dump-format.md).
#include "compare/dump.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/core.h>

#include "compare/hdf5_file.h"

#ifndef SSMCHECK_VERSION
#define SSMCHECK_VERSION "unknown"
#endif

namespace ssm::cmp {

const char* tool_version() { return SSMCHECK_VERSION; }

namespace {

namespace fs = std::filesystem;

// Layout attribute of each dataset: the documented memory order, checked on read.
constexpr const char* kLayoutH = "[nv][kd][vd], vd fastest";
constexpr const char* kLayoutConv = "[conv_dim][d_conv], column 0 oldest";
constexpr const char* kLayoutHInter = "[t][nv][kd][vd], vd fastest";
constexpr const char* kLayoutConvInter = "[t][conv_dim][d_conv], column 0 oldest";
constexpr const char* kLayoutStage = "[stage_elems]";

// Bounds that keep a malformed file from asking for absurd allocations.
constexpr int64_t kMaxLayers = 4096, kMaxSeqs = 65536, kMaxDim = 65536, kMaxK = 65536;
constexpr int64_t kMaxElems = int64_t(1) << 31;

std::string seq_path(size_t i) { return "/seq" + std::to_string(i); }
std::string layer_path(size_t i, size_t l) { return seq_path(i) + "/layer" + std::to_string(l); }

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::vector<int64_t> with_count(int64_t n, std::vector<int64_t> d) {
  d.insert(d.begin(), n);
  return d;
}

int64_t first_non_finite(const Tensor& t) {
  for (int64_t i = 0; i < t.size(); ++i)
    if (t.dtype() == DType::f16 ? !half_is_finite(t.f16()[size_t(i)]) : !std::isfinite(t.f32()[size_t(i)]))
      return i;
  return -1;
}

std::string element_text(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  std::string s = "(";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + ")";
}

// ---------------------------------------------------------------------------------------------
// Validation shared by writer and reader.

void check_tensor(const std::string& file, const std::string& obj, const Tensor& t,
                  const std::vector<int64_t>& shape, int dtype_rule, bool check_finite) {
  // dtype_rule: 0 = f32, 1 = f16, 2 = either
  if (t.shape() != shape)
    throw DumpError(file, obj, "shape " + dims_text(t.shape()) + " does not match the spec's " + dims_text(shape));
  if (dtype_rule == 0 && t.dtype() != DType::f32) throw DumpError(file, obj, "dtype f16, expected f32");
  if (dtype_rule == 1 && t.dtype() != DType::f16) throw DumpError(file, obj, "dtype f32, expected f16");
  if (check_finite) {
    const int64_t i = first_non_finite(t);
    if (i >= 0)
      throw DumpError(file, obj, fmt::format("non-finite value {} at element {}", t.get(i), element_text(shape, i)));
  }
}

// The layer indexes of a sequence group: ascending, distinct, inside the model.
void check_layers(const std::string& file, const std::string& sp, const ModelSpec& spec,
                  const std::vector<int>& layers) {
  for (size_t j = 0; j < layers.size(); ++j) {
    if (layers[j] < 0 || size_t(layers[j]) >= spec.layers.size())
      throw DumpError(file, sp, fmt::format("layer {} outside the model's {} layers", layers[j], spec.layers.size()));
    if (j && layers[j] <= layers[j - 1]) throw DumpError(file, sp, "layers must be ascending and distinct");
  }
}

}  // namespace

std::vector<int> all_layers(const ModelSpec& spec) {
  std::vector<int> v(spec.layers.size());
  for (size_t l = 0; l < v.size(); ++l) v[l] = int(l);
  return v;
}

void validate_sequence(const SequenceState& s, const std::string& file, const std::string& sp, const ModelSpec& spec,
                       HMode mode, const std::vector<int>& layers, bool stage_optional, bool check_finite) {
  check_layers(file, sp, spec, layers);
  const bool pool16 = mode == HMode::f16_pool;
  if (s.layers.size() != layers.size())
    throw DumpError(file, sp, layers.size() == spec.layers.size()
                                  ? fmt::format("{} layers, the model has {}", s.layers.size(), spec.layers.size())
                                  : fmt::format("{} layers, {} recorded", s.layers.size(), layers.size()));
  if (s.last_verify_k < 0) throw DumpError(file, sp + "@last_verify_k", "negative");
  const size_t n_inter = size_t(std::max(0, s.last_verify_k - 1));
  for (size_t j = 0; j < s.layers.size(); ++j) {
    const LayerSpec& ls = spec.layers[size_t(layers[j])];
    const LayerState& L = s.layers[j];
    const std::string lp = sp + "/layer" + std::to_string(layers[j]);
    check_tensor(file, lp + "/h", L.h, h_shape(ls), L.h_is_f16 ? 1 : 0, check_finite);
    check_tensor(file, lp + "/conv", L.conv, conv_shape(ls), 0, check_finite);
    if (L.h_checkpoint) check_tensor(file, lp + "/h_checkpoint", *L.h_checkpoint, h_shape(ls), 2, check_finite);
    if (L.conv_checkpoint)
      check_tensor(file, lp + "/conv_checkpoint", *L.conv_checkpoint, conv_shape(ls), 0, check_finite);
    if (L.h_intermediates.size() != n_inter || L.conv_intermediates.size() != n_inter)
      throw DumpError(file, lp + "@intermediates",
                      fmt::format("{} h and {} conv intermediates, last_verify_k {} makes {} valid",
                                  L.h_intermediates.size(), L.conv_intermediates.size(), s.last_verify_k, n_inter));
    for (size_t t = 0; t < n_inter; ++t) {
      const std::string tp = fmt::format("[{}]", t);
      check_tensor(file, lp + "/h_intermediates" + tp, L.h_intermediates[t], h_shape(ls),
                   L.h_intermediates[0].dtype() == DType::f16 ? 1 : 0, check_finite);
      check_tensor(file, lp + "/conv_intermediates" + tp, L.conv_intermediates[t], conv_shape(ls), 0,
                   check_finite);
    }
  }
  if (s.h_prefill_stage ? !pool16 : pool16 && !stage_optional)
    throw DumpError(file, sp + "/h_prefill_stage",
                    pool16 ? "missing (h mode f16-pool has a staging blob)" : "present but h mode is not f16-pool");
  if (s.h_prefill_stage)
    check_tensor(file, sp + "/h_prefill_stage", *s.h_prefill_stage, {stage_elems(spec)}, 0, check_finite);
}

void validate_dump(const Dump& dump, const std::string& file, bool check_finite) {
  if (dump.spec.layers.empty()) throw DumpError(file, "/model", "no layers");
  for (size_t l = 0; l < dump.spec.layers.size(); ++l) {
    try {
      dump.spec.layers[l].validate();
    } catch (const std::exception& e) {
      throw DumpError(file, "/model/layer" + std::to_string(l), e.what());
    }
  }
  const std::vector<int> layers = all_layers(dump.spec);
  for (size_t i = 0; i < dump.sequences.size(); ++i)
    validate_sequence(dump.sequences[i].state, file, seq_path(i), dump.spec, dump.pool.h_mode, layers,
                      /*stage_optional=*/false, check_finite);
}

// ---------------------------------------------------------------------------------------------
// Writer.

namespace {

void put_tensor(hid_t loc, const std::string& name, const Tensor& t, const char* layout) {
  h5::Handle d = h5::write_dataset(loc, name, t.dtype(), t.shape(), t.raw());
  h5::write_attr_str(d, "dtype", to_string(t.dtype()));
  h5::write_attr_str(d, "layout", layout);
}

void put_stack(hid_t loc, const std::string& name, const std::vector<Tensor>& ts, const char* layout) {
  const DType dt = ts.at(0).dtype();
  std::vector<unsigned char> buf;
  for (const Tensor& t : ts) {
    if (t.dtype() != dt || t.shape() != ts[0].shape()) throw h5::Error(name + ": tensors of mixed dtypes or shapes");
    const auto* p = static_cast<const unsigned char*>(t.raw());
    buf.insert(buf.end(), p, p + t.bytes());
  }
  h5::Handle d = h5::write_dataset(loc, name, dt, with_count(int64_t(ts.size()), ts[0].shape()), buf.data());
  h5::write_attr_str(d, "dtype", to_string(dt));
  h5::write_attr_str(d, "layout", layout);
}

void write_file(const std::string& path, const Dump& dump) {
  h5::Handle f = h5::create_file(path);
  const Provenance& p = dump.provenance;
  h5::write_attr_str(f, "format", kDumpFormat);
  h5::write_attr_i64(f, "version", kDumpVersion);
  h5::write_attr_str(f, "tool_version", p.tool_version.empty() ? tool_version() : p.tool_version);
  h5::write_attr_str(f, "backend", p.backend);
  h5::write_attr_u64(f, "seed", p.seed);
  h5::write_attr_i64(f, "op_index", p.op_index);
  h5::write_attr_str(f, "ops", p.ops);
  h5::write_attr_str(f, "case", p.case_name);
  h5::write_attr_str(f, "h_mode", to_string(dump.pool.h_mode));
  h5::write_attr_i64(f, "sequences", int64_t(dump.sequences.size()));
  {
    h5::Handle pg = h5::create_group(f, "pool");
    h5::write_attr_i64(pg, "max_slots", dump.pool.max_slots);
    std::vector<int64_t> caps;
    for (int s = 0; s < dump.pool.max_slots; ++s) caps.push_back(dump.pool.capacity(s));
    if (!caps.empty()) h5::write_attr_i64s(pg, "h_capacity", caps);
    h5::write_attr_i64(pg, "conv_capacity", dump.pool.conv_capacity);
    h5::write_attr_i64(pg, "snapshot_slots", dump.pool.snapshot_slots);
  }
  {
    h5::Handle mg = h5::create_group(f, "model");
    h5::write_attr_str(mg, "name", dump.spec.name);
    h5::write_attr_i64(mg, "layers", int64_t(dump.spec.layers.size()));
    for (size_t l = 0; l < dump.spec.layers.size(); ++l) {
      const LayerSpec& s = dump.spec.layers[l];
      h5::Handle lg = h5::create_group(mg, "layer" + std::to_string(l));
      h5::write_attr_str(lg, "kind", to_string(s.kind));
      h5::write_attr_i64(lg, "nk", s.nk);
      h5::write_attr_i64(lg, "nv", s.nv);
      h5::write_attr_i64(lg, "kd", s.kd);
      h5::write_attr_i64(lg, "vd", s.vd);
      h5::write_attr_i64(lg, "d_conv", s.d_conv);
      h5::write_attr_i64(lg, "conv_bias", s.conv_bias ? 1 : 0);
      h5::write_attr_str(lg, "output_gate", to_string(s.output_gate));
      h5::write_attr_f32(lg, "eps", s.eps);
      h5::write_attr_str(lg, "name", s.name());
    }
  }
  const std::vector<int> layers = all_layers(dump.spec);
  for (size_t i = 0; i < dump.sequences.size(); ++i)
    write_sequence_group(f, "seq" + std::to_string(i), dump.sequences[i].seq, dump.sequences[i].state, layers);
  f.close("close " + path);
}

}  // namespace

void write_sequence_group(hid_t loc, const std::string& name, int seq, const SequenceState& state,
                          const std::vector<int>& layers) {
  if (layers.size() != state.layers.size())
    throw h5::Error(name + fmt::format(": {} layer states for {} layers", state.layers.size(), layers.size()));
  h5::Handle sg = h5::create_group(loc, name);
  h5::write_attr_i64(sg, "seq", seq);
  h5::write_attr_i64(sg, "slot", state.slot);
  h5::write_attr_i64(sg, "last_verify_k", state.last_verify_k);
  for (size_t j = 0; j < state.layers.size(); ++j) {
    const LayerState& L = state.layers[j];
    h5::Handle lg = h5::create_group(sg, "layer" + std::to_string(layers[j]));
    h5::write_attr_i64(lg, "h_is_f16", L.h_is_f16 ? 1 : 0);
    h5::write_attr_i64(lg, "intermediates", int64_t(L.h_intermediates.size()));
    put_tensor(lg, "h", L.h, kLayoutH);
    put_tensor(lg, "conv", L.conv, kLayoutConv);
    if (L.h_checkpoint) put_tensor(lg, "h_checkpoint", *L.h_checkpoint, kLayoutH);
    if (L.conv_checkpoint) put_tensor(lg, "conv_checkpoint", *L.conv_checkpoint, kLayoutConv);
    if (!L.h_intermediates.empty()) {
      put_stack(lg, "h_intermediates", L.h_intermediates, kLayoutHInter);
      put_stack(lg, "conv_intermediates", L.conv_intermediates, kLayoutConvInter);
    }
  }
  if (state.h_prefill_stage) put_tensor(sg, "h_prefill_stage", *state.h_prefill_stage, kLayoutStage);
}

void write_dump(const std::string& path, const Dump& dump) {
  validate_dump(dump, path, /*check_finite=*/false);
  for (size_t i = 0; i < dump.sequences.size(); ++i)
    for (size_t l = 0; l < dump.sequences[i].state.layers.size(); ++l) {
      const auto& hi = dump.sequences[i].state.layers[l].h_intermediates;
      for (const Tensor& t : hi)
        if (t.dtype() != hi[0].dtype())
          throw DumpError(path, layer_path(i, l) + "/h_intermediates", "intermediates of mixed dtypes");
    }
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    write_file(tmp, dump);
  } catch (const h5::Error& e) {
    std::remove(tmp.c_str());
    throw DumpError(path, "/", std::string("writing failed: ") + e.what());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw DumpError(path, "/", "rename from " + tmp + " failed: " + ec.message());
  }
}

// ---------------------------------------------------------------------------------------------
// Reader.

namespace {

class Reader {
 public:
  Reader(std::string file, ReadOptions opt) : file_(std::move(file)), opt_(opt) {}

  Dump read() {
    std::error_code ec;
    const auto st = fs::status(file_, ec);
    if (ec || !fs::exists(st)) throw DumpError(file_, "/", "no such file");
    if (!fs::is_regular_file(st)) throw DumpError(file_, "/", "not a regular file");
    const auto size = fs::file_size(file_, ec);
    if (!ec && size == 0) throw DumpError(file_, "/", "empty file (0 bytes), not an HDF5 dump");
    h5::silence_errors();
    const htri_t is = H5Fis_hdf5(file_.c_str());
    if (is <= 0) {
      h5::error_stack();  // clear
      throw DumpError(file_, "/", "not an HDF5 file (no HDF5 signature)");
    }
    h5::Handle f = guard("/", [&] { return h5::open_file(file_); });

    Dump d;
    const std::string format = str_attr(f, "/", "format");
    if (format != kDumpFormat)
      throw DumpError(file_, "/@format", "is '" + format + "', expected '" + kDumpFormat + "'");
    const int64_t version = int_attr(f, "/", "version", INT64_MIN, INT64_MAX);
    if (version != kDumpVersion)
      throw DumpError(file_, "/@version",
                      fmt::format("unsupported version {} (this tool reads version {})", version, kDumpVersion));
    Provenance& p = d.provenance;
    p.tool_version = str_attr(f, "/", "tool_version");
    p.backend = str_attr(f, "/", "backend");
    p.seed = guard("/@seed", [&] { return h5::read_attr_u64(f, "seed"); });
    p.op_index = int(int_attr(f, "/", "op_index", -1, INT32_MAX));
    p.ops = opt_str_attr(f, "/", "ops");
    p.case_name = opt_str_attr(f, "/", "case");
    const std::string mode = str_attr(f, "/", "h_mode");
    try {
      d.pool.h_mode = parse_h_mode(mode);
    } catch (const std::exception& e) {
      throw DumpError(file_, "/@h_mode", e.what());
    }
    read_pool(f, d.pool);
    read_model(f, d.spec);
    const int64_t nseq = int_attr(f, "/", "sequences", 0, kMaxSeqs);
    const std::vector<int> layers = all_layers(d.spec);
    for (int64_t i = 0; i < nseq; ++i) {
      const std::string sp = seq_path(size_t(i));
      h5::Handle sg = group(f, "/", sp.substr(1));
      d.sequences.push_back(read_seq(sg, sp, d.spec, d.pool.h_mode, layers, /*stage_optional=*/false));
    }
    validate_dump(d, file_, !opt_.allow_non_finite);
    f.close("close");
    return d;
  }

 private:
  template <class F>
  auto guard(const std::string& obj, F f) -> decltype(f()) {
    try {
      return f();
    } catch (const h5::Error& e) {
      throw DumpError(file_, obj, e.what());
    }
  }

  std::string str_attr(hid_t loc, const std::string& path, const std::string& name) {
    return guard(at(path, name), [&] { return h5::read_attr_string(loc, name); });
  }
  std::string opt_str_attr(hid_t loc, const std::string& path, const std::string& name) {
    if (!guard(at(path, name), [&] { return h5::attr_exists(loc, name); })) return "";
    return str_attr(loc, path, name);
  }
  int64_t int_attr(hid_t loc, const std::string& path, const std::string& name, int64_t lo, int64_t hi) {
    const int64_t v = guard(at(path, name), [&] { return h5::read_attr_int(loc, name); });
    if (v < lo || v > hi) throw DumpError(file_, at(path, name), fmt::format("value {} outside [{}, {}]", v, lo, hi));
    return v;
  }
  static std::string at(const std::string& path, const std::string& name) {
    return path + "@" + name;  // "/@format", "/model/layer0@nk"
  }

  h5::Handle group(hid_t loc, const std::string& path, const std::string& name, bool required = true) {
    const std::string full = (path == "/" ? "/" : path + "/") + name;
    if (!guard(full, [&] { return h5::link_exists(loc, name); })) {
      if (!required) return h5::Handle();
      throw DumpError(file_, full, "missing group");
    }
    if (guard(full, [&] { return h5::object_type(loc, name); }) != H5O_TYPE_GROUP)
      throw DumpError(file_, full, "is not a group");
    return guard(full, [&] { return h5::open_group(loc, name); });
  }

  // Reads dataset `name` of group `loc` (at `path`), checking its attributes, type and shape.
  // dtype_rule: 0 f32, 1 f16, 2 either. Returns false when optional and absent.
  bool tensor(hid_t loc, const std::string& path, const std::string& name, const std::vector<int64_t>& shape,
              int dtype_rule, const char* layout, bool required, Tensor* out) {
    const std::string full = path + "/" + name;
    if (!guard(full, [&] { return h5::link_exists(loc, name); })) {
      if (!required) return false;
      throw DumpError(file_, full, "missing dataset");
    }
    if (guard(full, [&] { return h5::object_type(loc, name); }) != H5O_TYPE_DATASET)
      throw DumpError(file_, full, "is not a dataset");
    h5::Handle d = guard(full, [&] { return h5::open_dataset(loc, name); });
    const std::string dt = str_attr(d, full, "dtype");
    if (dt != "f32" && dt != "f16") throw DumpError(file_, full + "@dtype", "is '" + dt + "', expected f32 or f16");
    const DType dtype = dt == "f16" ? DType::f16 : DType::f32;
    if (dtype_rule == 0 && dtype != DType::f32) throw DumpError(file_, full + "@dtype", "is f16, expected f32");
    if (dtype_rule == 1 && dtype != DType::f16)
      throw DumpError(file_, full + "@dtype", "is f32, expected f16 (h_is_f16 is set)");
    const std::string lay = str_attr(d, full, "layout");
    if (lay != layout) throw DumpError(file_, full + "@layout", "is '" + lay + "', expected '" + layout + "'");
    const h5::DatasetInfo info = guard(full, [&] { return h5::dataset_info(d); });
    if (dtype == DType::f16 && !info.is_f16)
      throw DumpError(file_, full, "dtype attribute says f16 but the data is stored as " + info.type_text);
    if (dtype == DType::f32 && !info.is_f32)
      throw DumpError(file_, full, "dtype attribute says f32 but the data is stored as " + info.type_text);
    if (info.dims != shape)
      throw DumpError(file_, full, "shape " + dims_text(info.dims) + " does not match the spec's " + dims_text(shape));
    Tensor t = Tensor::zeros(dtype, shape);
    guard(full, [&] {
      h5::read_dataset(d, dtype, t.raw());
      return 0;
    });
    if (!opt_.allow_non_finite) {
      const int64_t i = first_non_finite(t);
      if (i >= 0)
        throw DumpError(file_, full, fmt::format("non-finite value {} at element {}", t.get(i), element_text(shape, i)));
    }
    *out = std::move(t);
    return true;
  }

  std::vector<Tensor> unstack(const Tensor& s) {
    std::vector<Tensor> v;
    std::vector<int64_t> shape(s.shape().begin() + 1, s.shape().end());
    for (int64_t t = 0; t < s.shape()[0]; ++t) {
      Tensor one = Tensor::zeros(s.dtype(), shape);
      const auto* p = static_cast<const unsigned char*>(s.raw()) + size_t(t) * one.bytes();
      std::copy(p, p + one.bytes(), static_cast<unsigned char*>(one.raw()));
      v.push_back(std::move(one));
    }
    return v;
  }

  void read_pool(hid_t f, PoolConfig& pool) {
    h5::Handle g = group(f, "/", "pool", /*required=*/false);
    if (g.id() < 0) {  // optional: an engine's dump may have no pool
      pool.h_capacity.clear();
      return;
    }
    pool.max_slots = int(int_attr(g, "/pool", "max_slots", 1, kMaxSeqs));
    pool.conv_capacity = int(int_attr(g, "/pool", "conv_capacity", 0, kMaxK));
    pool.snapshot_slots = int(int_attr(g, "/pool", "snapshot_slots", 0, kMaxSeqs));
    const auto caps = guard("/pool@h_capacity", [&] { return h5::read_attr_ints(g, "h_capacity"); });
    if (caps.size() != size_t(pool.max_slots))
      throw DumpError(file_, "/pool@h_capacity",
                      fmt::format("{} entries for {} slots", caps.size(), pool.max_slots));
    pool.h_capacity.clear();
    for (int64_t c : caps) {
      if (c < 0 || c > kMaxK) throw DumpError(file_, "/pool@h_capacity", fmt::format("bad capacity {}", c));
      pool.h_capacity.push_back(int(c));
    }
  }

  void read_model(hid_t f, ModelSpec& spec) {
    h5::Handle mg = group(f, "/", "model");
    spec.name = opt_str_attr(mg, "/model", "name");
    const int64_t n = int_attr(mg, "/model", "layers", 1, kMaxLayers);
    for (int64_t l = 0; l < n; ++l) {
      const std::string lp = "/model/layer" + std::to_string(l);
      h5::Handle lg = group(mg, "/model", "layer" + std::to_string(l));
      LayerSpec s;
      const std::string kind = str_attr(lg, lp, "kind");
      if (kind != "gdn") throw DumpError(file_, lp + "@kind", "is '" + kind + "': only gdn layers are supported");
      s.nk = int(int_attr(lg, lp, "nk", 1, kMaxDim));
      s.nv = int(int_attr(lg, lp, "nv", 1, kMaxDim));
      s.kd = int(int_attr(lg, lp, "kd", 1, kMaxDim));
      s.vd = int(int_attr(lg, lp, "vd", 1, kMaxDim));
      s.d_conv = int(int_attr(lg, lp, "d_conv", 1, kMaxDim));
      s.conv_bias = int_attr(lg, lp, "conv_bias", 0, 1) != 0;
      const std::string gate = str_attr(lg, lp, "output_gate");
      if (gate == "silu") s.output_gate = OutputGate::silu;
      else if (gate == "sigmoid") s.output_gate = OutputGate::sigmoid;
      else throw DumpError(file_, lp + "@output_gate", "is '" + gate + "', expected silu or sigmoid");
      const double eps = guard(lp + "@eps", [&] { return h5::read_attr_float(lg, "eps"); });
      if (!(eps > 0) || !std::isfinite(eps)) throw DumpError(file_, lp + "@eps", "must be finite and > 0");
      s.eps = float(eps);
      try {
        s.validate();
      } catch (const std::exception& e) {
        throw DumpError(file_, lp, e.what());
      }
      if (s.h_elems() > kMaxElems || s.conv_elems() > kMaxElems) throw DumpError(file_, lp, "layer too large");
      spec.layers.push_back(s);
    }
  }

  std::string file_;
  ReadOptions opt_;

 public:
  // One sequence group `sg` at `sp` (see read_sequence_group).
  DumpSequence read_seq(hid_t sg, const std::string& sp, const ModelSpec& spec, HMode mode,
                        const std::vector<int>& layers, bool stage_optional) {
    DumpSequence ds;
    ds.seq = int(int_attr(sg, sp, "seq", INT32_MIN, INT32_MAX));
    ds.state.slot = int(int_attr(sg, sp, "slot", -1, INT32_MAX));
    ds.state.last_verify_k = int(int_attr(sg, sp, "last_verify_k", 0, kMaxK));
    const int64_t n_inter = std::max(0, ds.state.last_verify_k - 1);
    for (int l : layers) {
      const LayerSpec& ls = spec.layers.at(size_t(l));
      const std::string name = "layer" + std::to_string(l);
      const std::string lp = sp + "/" + name;
      h5::Handle lg = group(sg, sp, name);
      LayerState L;
      L.h_is_f16 = int_attr(lg, lp, "h_is_f16", 0, 1) != 0;
      const int64_t n = int_attr(lg, lp, "intermediates", 0, kMaxK);
      if (n != n_inter)
        throw DumpError(file_, lp + "@intermediates",
                        fmt::format("is {}, but last_verify_k {} makes {} valid intermediates", n,
                                    ds.state.last_verify_k, n_inter));
      tensor(lg, lp, "h", h_shape(ls), L.h_is_f16 ? 1 : 0, kLayoutH, true, &L.h);
      tensor(lg, lp, "conv", conv_shape(ls), 0, kLayoutConv, true, &L.conv);
      Tensor t;
      if (tensor(lg, lp, "h_checkpoint", h_shape(ls), 2, kLayoutH, false, &t)) L.h_checkpoint = std::move(t);
      if (tensor(lg, lp, "conv_checkpoint", conv_shape(ls), 0, kLayoutConv, false, &t))
        L.conv_checkpoint = std::move(t);
      if (n > 0) {
        tensor(lg, lp, "h_intermediates", with_count(n, h_shape(ls)), 2, kLayoutHInter, true, &t);
        L.h_intermediates = unstack(t);
        tensor(lg, lp, "conv_intermediates", with_count(n, conv_shape(ls)), 0, kLayoutConvInter, true, &t);
        L.conv_intermediates = unstack(t);
      } else {
        for (const char* member : {"h_intermediates", "conv_intermediates"})
          if (guard(lp + "/" + member, [&] { return h5::link_exists(lg, member); }))
            throw DumpError(file_, lp + "/" + member, "present but intermediates is 0");
      }
      ds.state.layers.push_back(std::move(L));
    }
    Tensor st;
    const bool required = mode == HMode::f16_pool && !stage_optional;
    if (tensor(sg, sp, "h_prefill_stage", {stage_elems(spec)}, 0, kLayoutStage, required, &st))
      ds.state.h_prefill_stage = std::move(st);
    return ds;
  }
};

}  // namespace

DumpSequence read_sequence_group(hid_t g, const std::string& file, const std::string& path, const ModelSpec& spec,
                                 HMode mode, const std::vector<int>& layers, bool stage_optional,
                                 const ReadOptions& options) {
  check_layers(file, path, spec, layers);
  DumpSequence ds;
  try {
    h5::silence_errors();
    ds = Reader(file, options).read_seq(g, path, spec, mode, layers, stage_optional);
  } catch (const DumpError&) {
    throw;
  } catch (const h5::Error& e) {
    throw DumpError(file, path, e.what());
  } catch (const std::exception& e) {
    throw DumpError(file, path, std::string("unexpected: ") + e.what());
  }
  validate_sequence(ds.state, file, path, spec, mode, layers, stage_optional, !options.allow_non_finite);
  return ds;
}

Dump read_dump(const std::string& path, const ReadOptions& options) {
  try {
    return Reader(path, options).read();
  } catch (const DumpError&) {
    throw;
  } catch (const h5::Error& e) {
    throw DumpError(path, "/", e.what());
  } catch (const std::exception& e) {
    throw DumpError(path, "/", std::string("unexpected: ") + e.what());
  }
}

}  // namespace ssm::cmp
