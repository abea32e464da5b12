// HDF5 state dumps: writer (temporary name, then rename) and a reader that validates every
// group, attribute, shape and dtype (see dump.h; schema in docs/dump-format.md).
#include "formats/dump.h"

#include <cmath>
#include <fstream>
#include <vector>
#include <fmt/core.h>

#include "formats/crash_probe.h"
#include "formats/checked_file.h"
#include "formats/hdf5_file.h"
#include "formats/memory_limit.h"
#include "formats/model_attrs.h"

#ifndef SSMCHECK_VERSION
#define SSMCHECK_VERSION "unknown"
#endif

namespace ssm::formats {

const char* tool_version() { return SSMCHECK_VERSION; }

const std::string& build_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
    std::vector<char> buf(1 << 16);
    bool read_any = false;
    while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
      read_any = true;
      for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ uint64_t(uint8_t(buf[size_t(i)]))) * 0x100000001b3ull;
    }
    return std::string("ssmcheck ") + SSMCHECK_VERSION + " exe:" + (read_any ? fmt::format("{:016x}", h) : "unknown");
  }();
  return id;
}

std::string build_id(const Backend& b) {
  const std::string id = b.numerics_id();
  return id.empty() ? build_id() : id;
}

namespace {

// Layout attribute of each dataset: the documented memory order, checked on read.
constexpr const char* kLayoutConv = "[conv_dim][d_conv], column 0 oldest";
constexpr const char* kLayoutConvInter = "[t][conv_dim][d_conv], column 0 oldest";
constexpr const char* kLayoutStage = "[stage_elems]";
constexpr const char* kLayoutPleHistory = "[ngram_size-1] token ids, oldest first";
constexpr const char* kLayoutPleConv = "[(k_size-1)*dilation][C], row 0 oldest";
constexpr const char* kLayoutPleHistorySnapshots = "[t][ngram_size-1] token ids, oldest first";
constexpr const char* kLayoutPleConvSnapshots = "[t][(k_size-1)*dilation][C], row 0 oldest";

// Bounds (with model_attrs.h's) that keep a malformed file from asking for absurd allocations.
constexpr int64_t kMaxSeqs = 65536;

// What the reader may hold (formats/memory_limit.h), read once.
const MemoryLimit& process_memory_limit() {
  static const MemoryLimit m = memory_limit();
  return m;
}

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
    throw FormatError(file, obj, "shape " + dims_text(t.shape()) + " does not match the spec's " + dims_text(shape));
  if (dtype_rule == 0 && t.dtype() != DType::f32) throw FormatError(file, obj, "dtype f16, expected f32");
  if (dtype_rule == 1 && t.dtype() != DType::f16) throw FormatError(file, obj, "dtype f32, expected f16");
  if (check_finite) {
    const int64_t i = first_non_finite(t);
    if (i >= 0)
      throw FormatError(file, obj, fmt::format("non-finite value {} at element {}", t.get(i), element_text(shape, i)));
  }
}

// The layer indexes of a sequence group: ascending, distinct, inside the model.
void check_layers(const std::string& file, const std::string& sp, const ModelSpec& spec,
                  const std::vector<int>& layers) {
  for (size_t j = 0; j < layers.size(); ++j) {
    if (layers[j] < 0 || size_t(layers[j]) >= spec.layers.size())
      throw FormatError(file, sp, fmt::format("layer {} outside the model's {} layers", layers[j], spec.layers.size()));
    if (j && layers[j] <= layers[j - 1]) throw FormatError(file, sp, "layers must be ascending and distinct");
  }
}

// The PLE fields of one layer (STATE-MODEL section 7): none on a layer hosting no carry; on one
// that does, the carry and the checkpoint's copy (each optional), last_verify_k snapshots, every
// history of token ids.
void validate_ple(const LayerState& L, const LayerSpec& ls, int last_verify_k, const std::string& file,
                  const std::string& lp, bool check_finite) {
  if (!ls.ple.hosted()) {
    if (L.ple || L.ple_checkpoint || !L.ple_snapshots.empty())
      throw FormatError(file, lp + "/ple_history", "a PLE carry on a layer that hosts none (its model attributes have no ple_channels)");
    return;
  }
  auto carry = [&](const PleCarry& c, const std::string& suffix) {
    check_tensor(file, lp + "/ple_history" + suffix, c.history, ple_history_shape(ls), 0, check_finite);
    check_tensor(file, lp + "/ple_conv" + suffix, c.conv, ple_conv_shape(ls), 0, check_finite);
    try {
      check_token_ids(c.history.f32(), c.history.size(), "token ids");
    } catch (const std::invalid_argument& e) {
      throw FormatError(file, lp + "/ple_history" + suffix, e.what());
    }
  };
  if (L.ple) carry(*L.ple, "");
  if (L.ple_checkpoint) carry(*L.ple_checkpoint, "_checkpoint");
  if (L.ple_snapshots.size() != size_t(last_verify_k))
    throw FormatError(file, lp + "@ple_snapshots",
                      fmt::format("{} PLE snapshots, last_verify_k {} makes {} (snapshot t: the carry after t rows)",
                                  L.ple_snapshots.size(), last_verify_k, last_verify_k));
  if (last_verify_k > 0 && !L.ple)
    throw FormatError(file, lp + "/ple_history", "missing: a verify ran, so the PLE carry exists");
  for (size_t t = 0; t < L.ple_snapshots.size(); ++t) carry(L.ple_snapshots[t], fmt::format("_snapshots[{}]", t));
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
    throw FormatError(file, sp, layers.size() == spec.layers.size()
                                    ? fmt::format("{} layers, the model has {}", s.layers.size(), spec.layers.size())
                                    : fmt::format("{} layers, {} recorded", s.layers.size(), layers.size()));
  if (s.last_verify_k < 0) throw FormatError(file, sp + "@last_verify_k", "negative");
  const size_t n_inter = size_t(std::max(0, s.last_verify_k - 1));
  // Non-finite values the contract allows (docs/state-model.md, "FP16 h"; docs/dump-format.md): in
  // the FP16 h modes the converter overflows to inf, an f16_store inf layer keeps inf and NaN, and a
  // prefill widens them into FP32 h and the stage, so the h-like fields (h, h_checkpoint,
  // h_intermediates, h_prefill_stage) may hold them there. Never in f32 mode, never in conv or PLE fields.
  const bool h_check_finite = check_finite && mode == HMode::f32;
  for (size_t j = 0; j < s.layers.size(); ++j) {
    const LayerSpec& ls = spec.layers[size_t(layers[j])];
    const LayerState& L = s.layers[j];
    const std::string lp = sp + "/layer" + std::to_string(layers[j]);
    check_tensor(file, lp + "/h", L.h, h_shape(ls), L.h_is_f16 ? 1 : 0, h_check_finite);
    check_tensor(file, lp + "/conv", L.conv, conv_shape(ls), 0, check_finite);
    if (L.h_checkpoint) check_tensor(file, lp + "/h_checkpoint", *L.h_checkpoint, h_shape(ls), 2, h_check_finite);
    if (L.conv_checkpoint)
      check_tensor(file, lp + "/conv_checkpoint", *L.conv_checkpoint, conv_shape(ls), 0, check_finite);
    if (L.h_intermediates.size() != n_inter || L.conv_intermediates.size() != n_inter)
      throw FormatError(file, lp + "@intermediates",
                        fmt::format("{} h and {} conv intermediates, last_verify_k {} makes {} valid",
                                    L.h_intermediates.size(), L.conv_intermediates.size(), s.last_verify_k, n_inter));
    for (size_t t = 0; t < n_inter; ++t) {
      const std::string tp = fmt::format("[{}]", t);
      check_tensor(file, lp + "/h_intermediates" + tp, L.h_intermediates[t], h_shape(ls),
                   L.h_intermediates[0].dtype() == DType::f16 ? 1 : 0, h_check_finite);
      check_tensor(file, lp + "/conv_intermediates" + tp, L.conv_intermediates[t], conv_shape(ls), 0,
                   check_finite);
    }
    validate_ple(L, ls, s.last_verify_k, file, lp, check_finite);
  }
  if (s.h_prefill_stage ? !pool16 || s.prefill_stage_absent : pool16 && !stage_optional && !s.prefill_stage_absent)
    throw FormatError(file, sp + "/h_prefill_stage",
                      !pool16 ? "present but h mode is not f16-pool"
                      : s.h_prefill_stage ? "present but the sequence says its implementation keeps none (prefill_stage_absent)"
                                          : "missing (h mode f16-pool has a staging blob)");
  if (s.h_prefill_stage)
    check_tensor(file, sp + "/h_prefill_stage", *s.h_prefill_stage, {stage_elems(spec)}, 0, h_check_finite);
}

void validate_dump(const Dump& dump, const std::string& file, bool check_finite) {
  if (dump.spec.layers.empty()) throw FormatError(file, "/model", "no layers");
  for (size_t l = 0; l < dump.spec.layers.size(); ++l) {
    try {
      dump.spec.layers[l].validate();
    } catch (const std::exception& e) {
      throw FormatError(file, "/model/layer" + std::to_string(l), e.what());
    }
  }
  const std::vector<int> layers = all_layers(dump.spec);
  for (size_t i = 0; i < dump.sequences.size(); ++i)
    validate_sequence(dump.sequences[i].state, file, seq_path(i), dump.spec, dump.pool.h_mode, layers,
                      /*stage_optional=*/false, check_finite);
  // States no pool can hold (the trace reader refuses the same): one logical sequence twice, two
  // sequences in one slot, a slot outside the pool, more valid intermediates than the slot's
  // capacity, FP16 state in an f32-mode dump.
  const PoolConfig& pool = dump.pool;
  for (size_t i = 0; i < dump.sequences.size(); ++i) {
    const DumpSequence& a = dump.sequences[i];
    const std::string sp = seq_path(i);
    for (size_t j = 0; j < i; ++j) {
      if (dump.sequences[j].seq == a.seq)
        throw FormatError(file, sp + "@seq", fmt::format("sequence {} appears twice (also {})", a.seq, seq_path(j)));
      if (a.state.slot >= 0 && dump.sequences[j].state.slot == a.state.slot)
        throw FormatError(file, sp + "@slot", fmt::format("slot {} holds two sequences (also {})", a.state.slot, seq_path(j)));
    }
    if (pool.max_slots > 0 && a.state.slot >= pool.max_slots)
      throw FormatError(file, sp + "@slot", fmt::format("slot {} is outside the pool of {} slots", a.state.slot, pool.max_slots));
    if (a.state.slot >= 0 && size_t(a.state.slot) < pool.h_capacity.size() &&
        a.state.last_verify_k - 1 > pool.capacity(a.state.slot))
      throw FormatError(file, sp + "@last_verify_k",
                        fmt::format("{} makes {} valid intermediates, slot {} holds {}", a.state.last_verify_k,
                                    a.state.last_verify_k - 1, a.state.slot, pool.capacity(a.state.slot)));
    if (pool.h_mode == HMode::f32)
      for (size_t l = 0; l < a.state.layers.size(); ++l) {
        const LayerState& L = a.state.layers[l];
        const bool f16 = L.h_is_f16 || L.h.dtype() == DType::f16 ||
                         (L.h_checkpoint && L.h_checkpoint->dtype() == DType::f16) ||
                         (!L.h_intermediates.empty() && L.h_intermediates[0].dtype() == DType::f16);
        if (f16)
          throw FormatError(file, sp + "/layer" + std::to_string(layers[l]),
                            "FP16 state in an f32-mode dump (h mode f32 never stores h in FP16)");
      }
  }
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

void write_contents(hid_t f, const Dump& dump) {
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
    write_pool_attrs(pg, dump.pool);
  }
  {
    h5::Handle mg = h5::create_group(f, "model");
    h5::write_attr_str(mg, "name", dump.spec.name);
    if (!dump.spec.source.empty()) h5::write_attr_str(mg, "source", dump.spec.source);
    h5::write_attr_i64(mg, "layers", int64_t(dump.spec.layers.size()));
    for (size_t l = 0; l < dump.spec.layers.size(); ++l) {
      h5::Handle lg = h5::create_group(mg, "layer" + std::to_string(l));
      write_layer_spec_attrs(lg, dump.spec.layers[l]);
    }
  }
  const std::vector<int> layers = all_layers(dump.spec);
  for (size_t i = 0; i < dump.sequences.size(); ++i)
    write_sequence_group(f, "seq" + std::to_string(i), dump.sequences[i].seq, dump.sequences[i].state, layers,
                         dump.spec);
}

}  // namespace

void write_sequence_group(hid_t loc, const std::string& name, int seq, const SequenceState& state,
                          const std::vector<int>& layers, const ModelSpec& spec) {
  if (layers.size() != state.layers.size())
    throw h5::Error(name + fmt::format(": {} layer states for {} layers", state.layers.size(), layers.size()));
  h5::Handle sg = h5::create_group(loc, name);
  h5::write_attr_i64(sg, "seq", seq);
  h5::write_attr_i64(sg, "slot", state.slot);
  h5::write_attr_i64(sg, "last_verify_k", state.last_verify_k);
  for (size_t j = 0; j < state.layers.size(); ++j) {
    const LayerState& L = state.layers[j];
    const std::string h_layout = spec.layers.at(size_t(layers[j])).h_layout(), h_inter = "[t]" + h_layout;
    h5::Handle lg = h5::create_group(sg, "layer" + std::to_string(layers[j]));
    h5::write_attr_i64(lg, "h_is_f16", L.h_is_f16 ? 1 : 0);
    h5::write_attr_i64(lg, "intermediates", int64_t(L.h_intermediates.size()));
    if (L.conv_oldest_column_absent) h5::write_attr_i64(lg, "conv_oldest_column_absent", 1);
    put_tensor(lg, "h", L.h, h_layout.c_str());
    put_tensor(lg, "conv", L.conv, kLayoutConv);
    if (L.h_checkpoint) put_tensor(lg, "h_checkpoint", *L.h_checkpoint, h_layout.c_str());
    if (L.conv_checkpoint) put_tensor(lg, "conv_checkpoint", *L.conv_checkpoint, kLayoutConv);
    if (!L.h_intermediates.empty()) {
      put_stack(lg, "h_intermediates", L.h_intermediates, h_inter.c_str());
      put_stack(lg, "conv_intermediates", L.conv_intermediates, kLayoutConvInter);
    }
    if (L.ple) {
      put_tensor(lg, "ple_history", L.ple->history, kLayoutPleHistory);
      put_tensor(lg, "ple_conv", L.ple->conv, kLayoutPleConv);
    }
    if (L.ple_checkpoint) {
      put_tensor(lg, "ple_history_checkpoint", L.ple_checkpoint->history, kLayoutPleHistory);
      put_tensor(lg, "ple_conv_checkpoint", L.ple_checkpoint->conv, kLayoutPleConv);
    }
    if (!L.ple_snapshots.empty()) {
      std::vector<Tensor> hist, conv;
      for (const PleCarry& c : L.ple_snapshots) {
        hist.push_back(c.history);
        conv.push_back(c.conv);
      }
      put_stack(lg, "ple_history_snapshots", hist, kLayoutPleHistorySnapshots);
      put_stack(lg, "ple_conv_snapshots", conv, kLayoutPleConvSnapshots);
    }
  }
  if (state.prefill_stage_absent) h5::write_attr_i64(sg, "prefill_stage_absent", 1);
  if (state.h_prefill_stage) put_tensor(sg, "h_prefill_stage", *state.h_prefill_stage, kLayoutStage);
}

void write_dump(const std::string& path, const Dump& dump) {
  validate_dump(dump, path, /*check_finite=*/false);
  for (size_t i = 0; i < dump.sequences.size(); ++i)
    for (size_t l = 0; l < dump.sequences[i].state.layers.size(); ++l) {
      const auto& hi = dump.sequences[i].state.layers[l].h_intermediates;
      for (const Tensor& t : hi)
        if (t.dtype() != hi[0].dtype())
          throw FormatError(path, layer_path(i, l) + "/h_intermediates", "intermediates of mixed dtypes");
    }
  write_atomically(path, "/", [&](hid_t f) { write_contents(f, dump); });
}

// ---------------------------------------------------------------------------------------------
// Reader.

namespace {

class Reader : public CheckedReader {
 public:
  Reader(std::string file, ReadOptions opt) : CheckedReader(std::move(file)), opt_(opt) {}

  Dump read() {
    h5::Handle f = open("dump");
    check_format(f, kDumpFormat, kDumpVersions);  // version 1 is the only one yet: read below
    only_attrs(
        *this, f, "/",
        {"format", "version", "tool_version", "backend", "seed", "op_index", "ops", "case", "h_mode", "sequences"});
    Dump d;
    Provenance& p = d.provenance;
    p.tool_version = str_attr(f, "/", "tool_version");
    p.backend = str_attr(f, "/", "backend");
    p.seed = guard("/@seed", [&] { return h5::read_attr_u64(f, "seed"); });
    p.op_index = int(int_attr(f, "/", "op_index", -1, INT32_MAX));
    p.ops = opt_str_attr(f, "/", "ops");
    p.case_name = opt_str_attr(f, "/", "case");
    d.pool.h_mode = read_h_mode_attr(*this, f);
    read_pool(f, d.pool);
    read_model(f, d.spec);
    const int64_t nseq = int_attr(f, "/", "sequences", 0, kMaxSeqs);
    check_size(d.spec, nseq);
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
  // Reads dataset `name` of group `loc` (at `path`), checking its attributes, type and shape.
  // dtype_rule: 0 f32, 1 f16, 2 either. Returns false when optional and absent.
  bool tensor(hid_t loc, const std::string& path, const std::string& name, const std::vector<int64_t>& shape,
              int dtype_rule, const char* layout, bool required, Tensor* out) {
    const std::string full = path + "/" + name;
    if (!guard(full, [&] { return h5::link_exists(loc, name); })) {
      if (!required) return false;
      throw FormatError(file_, full, "missing dataset");
    }
    h5::Handle d = guard(full, [&] { return h5::open_if(loc, name, H5I_DATASET); });
    if (d.id() < 0) throw FormatError(file_, full, "is not a dataset");
    only_attrs(*this, d, full, {"dtype", "layout"});
    const std::string dt = str_attr(d, full, "dtype");
    if (dt != "f32" && dt != "f16") throw FormatError(file_, full + "@dtype", "is '" + dt + "', expected f32 or f16");
    const DType dtype = dt == "f16" ? DType::f16 : DType::f32;
    if (dtype_rule == 0 && dtype != DType::f32) throw FormatError(file_, full + "@dtype", "is f16, expected f32");
    if (dtype_rule == 1 && dtype != DType::f16)
      throw FormatError(file_, full + "@dtype", "is f32, expected f16 (h_is_f16 is set)");
    const std::string lay = str_attr(d, full, "layout");
    if (lay != layout) throw FormatError(file_, full + "@layout", "is '" + lay + "', expected '" + layout + "'");
    const h5::DatasetInfo info = guard(full, [&] { return h5::dataset_info(d); });
    if (dtype == DType::f16 && !info.is_f16)
      throw FormatError(file_, full, "dtype attribute says f16 but the data is stored as " + info.type_text);
    if (dtype == DType::f32 && !info.is_f32)
      throw FormatError(file_, full, "dtype attribute says f32 but the data is stored as " + info.type_text);
    if (info.dims != shape)
      throw FormatError(file_, full, "shape " + dims_text(info.dims) + " does not match the spec's " + dims_text(shape));
    double bytes = double(dtype == DType::f16 ? 2 : 4);
    for (int64_t n : shape) bytes *= double(n);
    if (held_ + bytes > double(limit_.bytes))
      throw FormatError(
          file_, full,
          fmt::format("{} {} needs {}, which takes what the dump holds past the memory this process "
                      "can use ({} with {} read before it)",
                      dims_text(shape), to_string(dtype), size_text(bytes), limit_.text(), size_text(held_)));
    held_ += bytes;
    Tensor t = Tensor::zeros(dtype, shape);
    guard(full, [&] {
      h5::read_dataset(d, dtype, t.raw());
      return 0;
    });
    // non-finite values: validate_dump / validate_sequence check them, by the contract's rule
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
    read_pool_attrs(*this, g, pool);
  }

  void read_model(hid_t f, ModelSpec& spec) {
    h5::Handle mg = group(f, "/", "model");
    only_attrs(*this, mg, "/model", {"layers", "name", "source"});
    spec.name = opt_str_attr(mg, "/model", "name");
    spec.source = opt_str_attr(mg, "/model", "source");
    const int64_t n = int_attr(mg, "/model", "layers", 1, kMaxLayers);
    for (int64_t l = 0; l < n; ++l) {
      const std::string name = "layer" + std::to_string(l);
      h5::Handle lg = group(mg, "/model", name);
      spec.layers.push_back(read_layer_spec_attrs(*this, lg, "/model/" + name, /*output_gate_optional=*/false));
    }
  }

  // The least the sequences need (h, in FP16 at least, and conv of every layer), from the model's
  // geometry and the sequence count, before anything is allocated.
  void check_size(const ModelSpec& spec, int64_t nseq) const {
    double per_seq = 0, largest = 0;
    size_t largest_layer = 0;
    for (size_t l = 0; l < spec.layers.size(); ++l) {
      const double b = double(spec.layers[l].h_elems()) * 2 + double(spec.layers[l].conv_elems()) * 4;
      per_seq += b;
      if (b > largest) largest = b, largest_layer = l;
    }
    const double need = per_seq * double(nseq);
    if (need > double(limit_.bytes))
      throw FormatError(file_, "/model",
                        fmt::format("{} sequences of {} layers need at least {} (per sequence {}, layer {}'s h and "
                                    "conv alone {}), more than the memory this process can use: {}",
                                    nseq, spec.layers.size(), size_text(need), size_text(per_seq), largest_layer,
                                    size_text(largest), limit_.text()));
  }

  ReadOptions opt_;
  const MemoryLimit& limit_ = process_memory_limit();
  double held_ = 0;  // bytes of the tensors read so far

  // The PLE datasets of a layer group (validate_ple checks what they hold against the model).
  void read_ple(hid_t lg, const std::string& lp, const LayerSpec& ls, int last_verify_k, LayerState& L) {
    const char* const names[] = {"ple_history", "ple_conv", "ple_history_checkpoint", "ple_conv_checkpoint",
                                 "ple_history_snapshots", "ple_conv_snapshots"};
    if (!ls.ple.hosted()) {
      for (const char* n : names)
        if (guard(lp + "/" + n, [&] { return h5::link_exists(lg, n); }))
          throw FormatError(file_, lp + "/" + n, "present, but the layer hosts no PLE carry (no ple_channels)");
      return;
    }
    auto carry = [&](const std::string& suffix) -> std::optional<PleCarry> {
      const std::string hn = "ple_history" + suffix, cn = "ple_conv" + suffix;
      PleCarry c;
      const bool has_h = tensor(lg, lp, hn, ple_history_shape(ls), 0, kLayoutPleHistory, false, &c.history);
      const bool has_c = tensor(lg, lp, cn, ple_conv_shape(ls), 0, kLayoutPleConv, false, &c.conv);
      if (has_h != has_c)
        throw FormatError(file_, lp + "/" + (has_h ? cn : hn), "missing (the carry's history and conv come together)");
      return has_h ? std::optional<PleCarry>(std::move(c)) : std::nullopt;
    };
    L.ple = carry("");
    L.ple_checkpoint = carry("_checkpoint");
    if (last_verify_k > 0) {
      Tensor h, c;
      tensor(lg, lp, "ple_history_snapshots", with_count(last_verify_k, ple_history_shape(ls)), 0,
             kLayoutPleHistorySnapshots, true, &h);
      tensor(lg, lp, "ple_conv_snapshots", with_count(last_verify_k, ple_conv_shape(ls)), 0, kLayoutPleConvSnapshots,
             true, &c);
      const std::vector<Tensor> hs = unstack(h), cs = unstack(c);
      for (size_t t = 0; t < hs.size(); ++t) L.ple_snapshots.push_back(PleCarry{hs[t], cs[t]});
    } else {
      for (const char* n : {"ple_history_snapshots", "ple_conv_snapshots"})
        if (guard(lp + "/" + n, [&] { return h5::link_exists(lg, n); }))
          throw FormatError(file_, lp + "/" + n, "present but last_verify_k is 0");
    }
  }

 public:
  // One sequence group `sg` at `sp` (see read_sequence_group).
  DumpSequence read_seq(hid_t sg, const std::string& sp, const ModelSpec& spec, HMode mode,
                        const std::vector<int>& layers, bool stage_optional) {
    DumpSequence ds;
    only_attrs(*this, sg, sp, {"seq", "slot", "last_verify_k", "prefill_stage_absent"});
    ds.seq = int(int_attr(sg, sp, "seq", INT32_MIN, INT32_MAX));
    ds.state.slot = int(int_attr(sg, sp, "slot", -1, INT32_MAX));
    ds.state.last_verify_k = int(int_attr(sg, sp, "last_verify_k", 0, kMaxK));
    ds.state.prefill_stage_absent = has_attr(sg, sp, "prefill_stage_absent") && int_attr(sg, sp, "prefill_stage_absent", 0, 1);
    const int64_t n_inter = std::max(0, ds.state.last_verify_k - 1);
    for (int l : layers) {
      const LayerSpec& ls = spec.layers.at(size_t(l));
      const std::string name = "layer" + std::to_string(l);
      const std::string lp = sp + "/" + name;
      h5::Handle lg = group(sg, sp, name);
      LayerState L;
      only_attrs(*this, lg, lp, {"h_is_f16", "intermediates", "conv_oldest_column_absent"});
      L.h_is_f16 = int_attr(lg, lp, "h_is_f16", 0, 1) != 0;
      L.conv_oldest_column_absent =
          has_attr(lg, lp, "conv_oldest_column_absent") && int_attr(lg, lp, "conv_oldest_column_absent", 0, 1);
      const int64_t n = int_attr(lg, lp, "intermediates", 0, kMaxK);
      if (n != n_inter)
        throw FormatError(file_, lp + "@intermediates",
                          fmt::format("is {}, but last_verify_k {} makes {} valid intermediates", n,
                                      ds.state.last_verify_k, n_inter));
      const std::string h_layout = ls.h_layout(), h_inter = "[t]" + h_layout;
      tensor(lg, lp, "h", h_shape(ls), L.h_is_f16 ? 1 : 0, h_layout.c_str(), true, &L.h);
      tensor(lg, lp, "conv", conv_shape(ls), 0, kLayoutConv, true, &L.conv);
      Tensor t;
      if (tensor(lg, lp, "h_checkpoint", h_shape(ls), 2, h_layout.c_str(), false, &t)) L.h_checkpoint = std::move(t);
      if (tensor(lg, lp, "conv_checkpoint", conv_shape(ls), 0, kLayoutConv, false, &t))
        L.conv_checkpoint = std::move(t);
      if (n > 0) {
        tensor(lg, lp, "h_intermediates", with_count(n, h_shape(ls)), 2, h_inter.c_str(), true, &t);
        L.h_intermediates = unstack(t);
        tensor(lg, lp, "conv_intermediates", with_count(n, conv_shape(ls)), 0, kLayoutConvInter, true, &t);
        L.conv_intermediates = unstack(t);
      } else {
        for (const char* member : {"h_intermediates", "conv_intermediates"})
          if (guard(lp + "/" + member, [&] { return h5::link_exists(lg, member); }))
            throw FormatError(file_, lp + "/" + member, "present but intermediates is 0");
      }
      read_ple(lg, lp, ls, ds.state.last_verify_k, L);
      ds.state.layers.push_back(std::move(L));
    }
    Tensor st;
    const bool required = mode == HMode::f16_pool && !stage_optional && !ds.state.prefill_stage_absent;
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
  h5::silence_errors();
  const DumpSequence ds = errors_as(
      file, path, [&] { return Reader(file, options).read_seq(g, path, spec, mode, layers, stage_optional); });
  validate_sequence(ds.state, file, path, spec, mode, layers, stage_optional, !options.allow_non_finite);
  return ds;
}

Dump read_dump(const std::string& path, const ReadOptions& options) {
  const auto read = [&] { return errors_as(path, "/", [&] { return Reader(path, options).read(); }); };
  const std::string crash = crash_probe([&] { (void)read(); });
  if (!crash.empty()) throw FormatError(path, "/", crash + ": the file is corrupted");
  return read();
}

}  // namespace ssm::formats
