// HDF5 dumps (formats/dump.h): bit-exact round trips for FP32 and FP16, byte-identical files,
// the temporary-name write, python3-h5py interop both ways, a catalogue of malformed files
// (each a FormatError naming the file and object, and exit code 2 from `ssmcheck diff`), and
// the dump/diff command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "compare/compare.h"
#include "core/runner.h"
#include "fixtures/generators.h"
#include "formats/dump.h"
#include "formats/hdf5_file.h"
#include "reference/reference_backend.h"
#include "tests/support/shell.h"
#include "tests/support/file_bytes.h"

namespace ssm::cmp {
namespace {

namespace fs = std::filesystem;

using test::q;
using test::sh;
using test::Shell;
using test::TempDir;

// The dump format's names (formats/dump.h); the rest of this file is the judge's.
using formats::Dump;
using formats::DumpSequence;
using formats::FormatError;
using formats::read_dump;
using formats::ReadOptions;
using formats::tool_version;
using formats::write_dump;

Dump make_dump(const std::string& preset, HMode mode, uint64_t seed, const std::string& ops) {
  const ModelSpec spec = make_preset(preset);
  GenConfig g;
  g.seed = seed;
  PoolConfig pool;
  pool.h_mode = mode;
  pool.h_capacity = {4, 4, 2, 2};
  ref::ReferenceBackend b;
  b.create_pool(make_model(spec, g), pool);
  Runner r(b, input_source(spec, g));
  const auto script = parse_script(ops);
  for (size_t i = 0; i < script.size(); ++i) r.run(script[i], int(i));
  Dump d;
  d.spec = spec;
  d.pool = pool;
  d.provenance.backend = b.name();
  d.provenance.seed = seed;
  d.provenance.op_index = int(script.size()) - 1;
  d.provenance.ops = to_string(script);
  d.provenance.case_name = "test " + preset;
  for (int s : r.live_seqs()) d.sequences.push_back({s, b.export_state(r.slot_of(s))});
  return d;
}

void expect_bit_equal(const std::optional<Tensor>& a, const std::optional<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (a) {
    EXPECT_TRUE(a->bit_equal(*b)) << what;
  }
}

void expect_same(const Dump& a, const Dump& b) {
  ASSERT_EQ(a.spec.layers.size(), b.spec.layers.size());
  EXPECT_EQ(a.spec.name, b.spec.name);
  for (size_t l = 0; l < a.spec.layers.size(); ++l) {
    EXPECT_EQ(a.spec.layers[l].name(), b.spec.layers[l].name());
    EXPECT_EQ(a.spec.layers[l].eps, b.spec.layers[l].eps);
  }
  EXPECT_EQ(a.pool.name(), b.pool.name());
  EXPECT_EQ(a.provenance.backend, b.provenance.backend);
  EXPECT_EQ(a.provenance.seed, b.provenance.seed);
  EXPECT_EQ(a.provenance.op_index, b.provenance.op_index);
  EXPECT_EQ(a.provenance.ops, b.provenance.ops);
  EXPECT_EQ(a.provenance.case_name, b.provenance.case_name);
  EXPECT_EQ(b.provenance.tool_version, tool_version());
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    const SequenceState& x = a.sequences[i].state;
    const SequenceState& y = b.sequences[i].state;
    EXPECT_EQ(a.sequences[i].seq, b.sequences[i].seq);
    EXPECT_EQ(x.slot, y.slot);
    EXPECT_EQ(x.last_verify_k, y.last_verify_k);
    EXPECT_EQ(x.prefill_stage_absent, y.prefill_stage_absent);
    expect_bit_equal(x.h_prefill_stage, y.h_prefill_stage, "stage");
    ASSERT_EQ(x.layers.size(), y.layers.size());
    for (size_t l = 0; l < x.layers.size(); ++l) {
      const LayerState& p = x.layers[l];
      const LayerState& r = y.layers[l];
      EXPECT_EQ(p.h_is_f16, r.h_is_f16);
      EXPECT_EQ(p.conv_oldest_column_absent, r.conv_oldest_column_absent);
      EXPECT_TRUE(p.h.bit_equal(r.h)) << "h layer " << l;
      EXPECT_TRUE(p.conv.bit_equal(r.conv)) << "conv layer " << l;
      expect_bit_equal(p.h_checkpoint, r.h_checkpoint, "h_checkpoint");
      expect_bit_equal(p.conv_checkpoint, r.conv_checkpoint, "conv_checkpoint");
      ASSERT_EQ(p.h_intermediates.size(), r.h_intermediates.size());
      ASSERT_EQ(p.conv_intermediates.size(), r.conv_intermediates.size());
      for (size_t t = 0; t < p.h_intermediates.size(); ++t) {
        EXPECT_TRUE(p.h_intermediates[t].bit_equal(r.h_intermediates[t])) << "h_intermediates " << t;
        EXPECT_TRUE(p.conv_intermediates[t].bit_equal(r.conv_intermediates[t])) << "conv_intermediates " << t;
      }
    }
    EXPECT_TRUE(compare_state(x, y, Tolerances::defaults(), Where{}, Strictness::bitwise).pass());
  }
}

const char* kOps = "alloc 3; alloc 3 @1; prefill 6; prefill 3 @1; checkpoint; decode @0,1; verify 4 @0,1";

class compare_dump_modes : public ::testing::TestWithParam<HMode> {};

TEST_P(compare_dump_modes, round_trip_is_bit_exact) {
  const uint64_t seed = 31;
  SCOPED_TRACE("seed=" + std::to_string(seed) + " mode=" + to_string(GetParam()));
  TempDir dir;
  const Dump d = make_dump("odd-d", GetParam(), seed, kOps);
  ASSERT_EQ(d.sequences.size(), 2u);
  ASSERT_EQ(d.sequences[0].state.layers[0].h_intermediates.size(), 3u);
  write_dump(dir.file("a.h5"), d);
  expect_same(d, read_dump(dir.file("a.h5")));
}

INSTANTIATE_TEST_SUITE_P(modes, compare_dump_modes, ::testing::Values(HMode::f32, HMode::f16, HMode::f16_pool),
                         [](const auto& info) {
                           return std::string(info.param == HMode::f16_pool ? "f16_pool" : to_string(info.param));
                         });

// A plug-in's conventions travel with its state: an f16-pool dump of an implementation with no
// staging blob (SSMP_NO_PREFILL_STAGE) and a d_conv-1 window reads back as such; a stage it says it
// does not keep, or a missing stage without the flag, is refused naming the object.
TEST(compare_dump, convention_flags_round_trip) {
  TempDir dir;
  Dump d = make_dump("odd-d", HMode::f16_pool, 31, kOps);
  for (LayerSpec& l : d.spec.layers) {  // the numerics the model was checked with travel too (in name())
    l.numerics.gates = GateMath::torch;
    l.numerics.f16_store = F16Store::inf;
    l.numerics.f16_rows = F16Rows::carried;
  }
  for (DumpSequence& s : d.sequences) {
    s.state.h_prefill_stage.reset();
    s.state.prefill_stage_absent = true;
    for (LayerState& L : s.state.layers) L.conv_oldest_column_absent = true;
  }
  write_dump(dir.file("a.h5"), d);
  expect_same(d, read_dump(dir.file("a.h5")));
  const Numerics expected{GateMath::torch, F16Store::inf, F16Rows::carried};
  EXPECT_TRUE(read_dump(dir.file("a.h5")).spec.layers[1].numerics == expected);
  Dump bad = d;
  bad.sequences[1].state.prefill_stage_absent = false;
  try {
    write_dump(dir.file("b.h5"), bad);
    ADD_FAILURE() << "no FormatError";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.object(), "/seq1/h_prefill_stage");
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  bad = d;
  bad.sequences[0].state.h_prefill_stage =
      make_dump("odd-d", HMode::f16_pool, 31, kOps).sequences[0].state.h_prefill_stage;
  try {
    write_dump(dir.file("c.h5"), bad);
    ADD_FAILURE() << "no FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("prefill_stage_absent"), std::string::npos) << e.what();
  }
}

// Every finite half pattern (subnormals, -0, 65504) once, and random finite FP32 bit patterns
// (denormals included): written and read back untouched.
TEST(compare_dump, round_trip_of_every_finite_half_and_random_f32_bits) {
  const uint64_t seed = 32;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  TempDir dir;
  LayerSpec s;
  s.nk = 1;
  s.nv = 4;
  s.kd = 128;
  s.vd = 124;  // 4 * 128 * 124 = 63488 = the number of finite halves
  Dump d;
  d.spec = ModelSpec{"all-halves", {s}};
  d.pool.h_mode = HMode::f16;
  d.provenance.backend = "test";
  DumpSequence seq;
  LayerState L;
  L.h_is_f16 = true;
  L.h = Tensor::zeros(DType::f16, h_shape(s));
  int64_t n = 0;
  for (uint32_t b = 0; b < 0x10000; ++b)
    if (half_is_finite(uint16_t(b))) L.h.f16()[n++] = uint16_t(b);
  ASSERT_EQ(n, L.h.size());
  L.conv = Tensor::zeros(DType::f32, conv_shape(s));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (int64_t i = 0; i < L.conv.size(); ++i) {
    uint32_t bits;
    do bits = rng();
    while ((bits & 0x7f800000u) == 0x7f800000u);  // finite only
    if (i % 7 == 0) bits &= 0x807fffffu;          // denormals
    std::memcpy(L.conv.f32() + i, &bits, 4);
  }
  L.h_checkpoint = L.conv;  // an FP32 checkpoint of the wrong shape is refused ...
  EXPECT_THROW(write_dump(dir.file("bad.h5"),
                          [&] {
                            Dump x = d;
                            x.sequences.push_back({0, {0, 0, {L}, {}, {}}});
                            return x;
                          }()),
               FormatError);
  L.h_checkpoint = Tensor::zeros(DType::f32, h_shape(s));  // ... the right shape in FP32 is fine
  for (int64_t i = 0; i < L.h.size(); ++i) L.h_checkpoint->f32()[i] = half_to_float(L.h.f16()[i]);
  seq.state.slot = 0;
  seq.state.layers.push_back(L);
  d.sequences.push_back(seq);
  write_dump(dir.file("bits.h5"), d);
  expect_same(d, read_dump(dir.file("bits.h5")));
}

TEST(compare_dump, same_content_same_bytes_and_no_temporary_left) {
  TempDir dir;
  const Dump d = make_dump("tiny", HMode::f16_pool, 33, kOps);
  write_dump(dir.file("a.h5"), d);
  write_dump(dir.file("b.h5"), d);
  const auto bytes = test::file_bytes;
  EXPECT_EQ(bytes(dir.file("a.h5")), bytes(dir.file("b.h5")));
  write_dump(dir.file("a.h5"), d);  // overwrite in place
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 2);
  EXPECT_THROW(write_dump(dir.file("no/such/dir/x.h5"), d), FormatError);
  EXPECT_FALSE(fs::exists(dir.file("no/such/dir")));
}

TEST(compare_dump, writer_refuses_inconsistent_state) {
  TempDir dir;
  Dump d = make_dump("tiny", HMode::f32, 34, kOps);
  d.sequences[1].state.layers[1].h = Tensor::zeros(DType::f32, {2, 8, 13});
  try {
    write_dump(dir.file("x.h5"), d);
    ADD_FAILURE() << "no FormatError";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.object(), "/seq1/layer1/h");
  }
  EXPECT_FALSE(fs::exists(dir.file("x.h5")));
}

// States no pool can hold are refused, naming the object: one logical sequence twice (then `diff X
// X` would say DIFFERENT), two sequences in one slot, a slot outside the pool, more intermediates
// than the slot's capacity, FP16 state in an f32-mode dump.
TEST(compare_dump, impossible_states_are_refused) {
  TempDir dir;
  const Dump d = make_dump("tiny", HMode::f32, 37, kOps);
  ASSERT_GE(d.sequences.size(), 2u);
  struct Bad {
    std::function<void(Dump&)> edit;
    std::string object, text;
  };
  const std::vector<Bad> bad = {
      {[](Dump& x) { x.sequences[1].seq = x.sequences[0].seq; }, "/seq1@seq", "appears twice"},
      {[](Dump& x) { x.sequences[1].state.slot = x.sequences[0].state.slot; }, "/seq1@slot", "holds two sequences"},
      {[](Dump& x) { x.sequences[0].state.slot = 9; }, "/seq0@slot", "outside the pool of 4 slots"},
      {[](Dump& x) {
         SequenceState& s = x.sequences[0].state;
         s.slot = 2;  // capacity 2
         s.last_verify_k = 5;
         for (auto& L : s.layers) {
           L.h_intermediates.assign(4, L.h);
           L.conv_intermediates.assign(4, L.conv);
         }
       },
       "/seq0@last_verify_k", "slot 2 holds 2"},
      {[](Dump& x) {
         LayerState& L = x.sequences[0].state.layers[0];
         L.h_is_f16 = true;
         L.h = Tensor::zeros(DType::f16, L.h.shape());
       },
       "/seq0/layer0", "FP16 state in an f32-mode dump"},
  };
  for (const Bad& b : bad) {
    Dump x = d;
    b.edit(x);
    try {
      write_dump(dir.file("x.h5"), x);
      ADD_FAILURE() << "no FormatError for " << b.object;
    } catch (const FormatError& e) {
      EXPECT_EQ(e.object(), b.object) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.text), std::string::npos) << e.what();
    }
  }
}

TEST(compare_dump, non_finite_is_written_but_rejected_on_read_unless_allowed) {
  TempDir dir;
  Dump d = make_dump("tiny", HMode::f32, 35, kOps);
  d.sequences[0].state.layers[1].conv_checkpoint->f32()[5] = std::nanf("");
  write_dump(dir.file("nan.h5"), d);
  try {
    read_dump(dir.file("nan.h5"));
    ADD_FAILURE() << "no FormatError";
  } catch (const FormatError& e) {
    EXPECT_EQ(e.object(), "/seq0/layer1/conv_checkpoint");
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.file("nan.h5")), std::string::npos) << e.what();
  }
  ReadOptions allow;
  allow.allow_non_finite = true;
  const Dump back = read_dump(dir.file("nan.h5"), allow);
  EXPECT_TRUE(std::isnan(back.sequences[0].state.layers[1].conv_checkpoint->f32()[5]));
}

// --- python3-h5py ------------------------------------------------------------------------------

std::string python_with_h5py() {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("SSMCHECK_PYTHON")) candidates.push_back(p);
  candidates.push_back("/usr/bin/python3");  // Debian's python3-h5py lives here
  candidates.push_back("python3");
  for (const auto& py : candidates)
    if (sh(py + " -c 'import h5py, numpy'").code == 0) return py;
  return "";
}

TEST(compare_dump, h5py_reads_f16_as_float16_with_the_same_bits) {
  const std::string py = python_with_h5py();
  if (py.empty()) GTEST_SKIP() << "no python3 with h5py (Debian: apt-get install python3-h5py)";
  TempDir dir;
  const Dump d = make_dump("odd-a", HMode::f16, 36, kOps);
  write_dump(dir.file("a.h5"), d);
  const Tensor& h = d.sequences[1].state.layers[1].h_intermediates[2];
  ASSERT_EQ(h.dtype(), DType::f16);
  {
    std::ofstream f(dir.file("bits.bin"), std::ios::binary);
    f.write(static_cast<const char*>(h.raw()), std::streamsize(h.bytes()));
  }
  // the stacked dataset holds t = 0..2; compare all of it against the three tensors
  const auto& hs = d.sequences[1].state.layers[1].h_intermediates;
  {
    std::ofstream f(dir.file("stack.bin"), std::ios::binary);
    for (const Tensor& t : hs) f.write(static_cast<const char*>(t.raw()), std::streamsize(t.bytes()));
  }
  const Shell r = sh(py + " " + q(SSMCHECK_H5PY_SCRIPT) + " check " + q(dir.file("a.h5")) +
                     " seq1/layer1/h_intermediates " + q(dir.file("stack.bin")));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;
  // a mismatch is seen (the check can fail)
  const Shell bad = sh(py + " " + q(SSMCHECK_H5PY_SCRIPT) + " check " + q(dir.file("a.h5")) +
                       " seq1/layer0/h_intermediates " + q(dir.file("stack.bin")));
  EXPECT_EQ(bad.code, 1) << bad.out;
}

TEST(compare_dump, a_dump_written_by_h5py_reads_back) {
  const std::string py = python_with_h5py();
  if (py.empty()) GTEST_SKIP() << "no python3 with h5py (Debian: apt-get install python3-h5py)";
  TempDir dir;
  const Shell r = sh(py + " " + q(SSMCHECK_H5PY_SCRIPT) + " write " + q(dir.file("py.h5")));
  ASSERT_EQ(r.code, 0) << r.out;
  const Dump d = read_dump(dir.file("py.h5"));
  EXPECT_EQ(d.provenance.backend, "python");
  EXPECT_EQ(d.pool.h_mode, HMode::f16);
  ASSERT_EQ(d.sequences.size(), 1u);
  const SequenceState& s = d.sequences[0].state;
  EXPECT_EQ(s.slot, 2);
  EXPECT_EQ(s.last_verify_k, 3);
  const LayerState& L = s.layers.at(0);
  ASSERT_EQ(L.h.dtype(), DType::f16);
  for (int64_t i = 0; i < L.h.size(); ++i) {
    const float want = float(((i * 37) % 101) - 50) / 64.0f;
    ASSERT_EQ(L.h.get(i), want) << i;
    ASSERT_EQ(L.h_intermediates.at(1).get(i), -want) << i;
  }
  for (int64_t i = 0; i < L.conv.size(); ++i) ASSERT_EQ(L.conv.f32()[i], float((i % 13) - 6) / 8.0f) << i;
  EXPECT_EQ(L.conv_intermediates.at(1).f32()[3], 2 * L.conv.f32()[3]);
}

// --- malformed files ---------------------------------------------------------------------------

// Edits an existing dump in place with the raw HDF5 API.
class Editor {
 public:
  explicit Editor(const std::string& path)
      : f_(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "open " + path) {}
  ~Editor() { f_.reset(); }
  h5::Handle obj(const std::string& p) { return h5::Handle(H5Oopen(f_, p.c_str(), H5P_DEFAULT), H5Oclose, p); }
  void drop_attr(const std::string& p, const std::string& name) {
    h5::Handle o = obj(p);
    h5::check(H5Adelete(o, name.c_str()), "delete attr");
  }
  void set_i64(const std::string& p, const std::string& name, int64_t v) {
    drop_attr(p, name);
    h5::write_attr_i64(obj(p), name, v);
  }
  void set_str(const std::string& p, const std::string& name, const std::string& v) {
    drop_attr(p, name);
    h5::write_attr_str(obj(p), name, v);
  }
  void unlink(const std::string& p) { h5::check(H5Ldelete(f_, p.c_str(), H5P_DEFAULT), "unlink " + p); }
  // Replaces dataset `name` of group `g` with data of `dtype` and `dims`, attributes as given.
  void replace(const std::string& g, const std::string& name, DType dtype, const std::vector<int64_t>& dims,
               const void* data, const std::string& dtype_attr, const std::string& layout) {
    unlink(g + "/" + name);
    h5::Handle d = h5::write_dataset(obj(g), name, dtype, dims, data);
    h5::write_attr_str(d, "dtype", dtype_attr);
    h5::write_attr_str(d, "layout", layout);
  }
  hid_t file() const { return f_; }

 private:
  h5::Handle f_;
};

struct BadCase {
  std::string name;
  std::function<void(const std::string& path)> make;
  std::string needle;  // must appear in the error (object path and/or reason)
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

TEST(compare_dump, catalogue_of_malformed_files_gives_dump_error_and_exit_2) {
  TempDir dir;
  const std::string good = dir.file("good.h5"), good_pool = dir.file("good_pool.h5");
  write_dump(good, make_dump("tiny", HMode::f16, 37, "alloc; prefill 5; checkpoint; decode; verify 3"));
  write_dump(good_pool, make_dump("tiny", HMode::f16_pool, 37, "alloc; prefill 5"));
  const std::string good_bytes = test::file_bytes(good);
  const std::string h_layout = "[nv][kd][vd], vd fastest";
  const std::vector<BadCase> cases = {
      {"empty", [](const std::string& p) { write_bytes(p, ""); }, "/: empty file"},
      {"not_hdf5", [](const std::string& p) { write_bytes(p, "this is not an HDF5 file\n"); }, "/: not an HDF5 file"},
      {"truncated", [&](const std::string& p) { write_bytes(p, good_bytes.substr(0, good_bytes.size() / 2)); },
       "truncated"},
      {"missing_model", [](const std::string& p) { Editor(p).unlink("/model"); }, "/model: missing group"},
      {"missing_layer_group", [](const std::string& p) { Editor(p).unlink("/seq0/layer1"); },
       "/seq0/layer1: missing group"},
      {"wrong_shape_h",
       [&](const std::string& p) {
         std::vector<uint16_t> v(2 * 8 * 13, 0x3c00);
         Editor(p).replace("/seq0/layer0", "h", DType::f16, {2, 8, 13}, v.data(), "f16", h_layout);
       },
       "/seq0/layer0/h: shape [2, 8, 13] does not match"},
      {"f32_data_declared_f16",
       [&](const std::string& p) {
         std::vector<float> v(2 * 8 * 12, 1.0f);
         Editor(p).replace("/seq0/layer0", "h", DType::f32, {2, 8, 12}, v.data(), "f16", h_layout);
       },
       "/seq0/layer0/h: dtype attribute says f16 but the data is stored as float 4 bytes"},
      {"wrong_dtype_attr", [](const std::string& p) { Editor(p).set_str("/seq0/layer0/conv", "dtype", "f16"); },
       "/seq0/layer0/conv@dtype"},
      {"bogus_dtype_attr", [](const std::string& p) { Editor(p).set_str("/seq0/layer1/conv", "dtype", "bf16"); },
       "/seq0/layer1/conv@dtype: is 'bf16'"},
      {"missing_dtype_attr", [](const std::string& p) { Editor(p).drop_attr("/seq0/layer0/h_checkpoint", "dtype"); },
       "/seq0/layer0/h_checkpoint@dtype: missing attribute"},
      {"wrong_layout", [](const std::string& p) { Editor(p).set_str("/seq0/layer0/h", "layout", "[vd][kd][nv]"); },
       "/seq0/layer0/h@layout"},
      // (FP16 h of this f16-mode dump may hold inf and NaN, as the contract's converter makes them:
      // docs/dump-format.md; the conv may not)
      {"nan_in_conv",
       [&](const std::string& p) {
         std::vector<float> v(40 * 4, 0.5f);
         v[2 * 4 + 1] = std::nanf("");  // NaN at (2, 1)
         Editor(p).replace("/seq0/layer1", "conv", DType::f32, {40, 4}, v.data(), "f32",
                           "[conv_dim][d_conv], column 0 oldest");
       },
       "/seq0/layer1/conv: non-finite value nan at element (2, 1)"},
      {"negative_nk", [](const std::string& p) { Editor(p).set_i64("/model/layer0", "nk", -1); },
       "/model/layer0@nk: value -1 outside"},
      {"nv_not_multiple_of_nk", [](const std::string& p) { Editor(p).set_i64("/model/layer1", "nk", 3); },
       "/model/layer1: gdn(nk=3"},
      {"wrong_version", [](const std::string& p) { Editor(p).set_i64("/", "version", 2); },
       "/@version: version 2 was written by a newer ssmcheck: this one reads versions 1..1"},
      {"version_never_written", [](const std::string& p) { Editor(p).set_i64("/", "version", 0); },
       "/@version: version 0 was never written by ssmcheck (versions 1..1 exist)"},
      {"wrong_format", [](const std::string& p) { Editor(p).set_str("/", "format", "other-dump"); }, "/@format"},
      {"h_mode_not_a_string", [](const std::string& p) { Editor(p).set_i64("/", "h_mode", 1); },
       "/@h_mode: attribute 'h_mode' must be one string"},
      {"intermediates_vs_last_verify_k", [](const std::string& p) { Editor(p).set_i64("/seq0", "last_verify_k", 4); },
       "/seq0/layer0@intermediates: is 2, but last_verify_k 4 makes 3"},
      {"h_is_f16_but_f32_dtype", [](const std::string& p) { Editor(p).set_i64("/seq0/layer1", "h_is_f16", 0); },
       "/seq0/layer1/h@dtype: is f16, expected f32"},
      {"dataset_is_a_group",
       [](const std::string& p) {
         Editor e(p);
         e.unlink("/seq0/layer0/conv");
         h5::create_group(e.obj("/seq0/layer0"), "conv");
       },
       "/seq0/layer0/conv: is not a dataset"},
      {"missing_sequence", [](const std::string& p) { Editor(p).set_i64("/", "sequences", 2); },
       "/seq1: missing group"},
      {"missing_stage_in_f16_pool",
       [&](const std::string& p) {
         fs::copy_file(good_pool, p, fs::copy_options::overwrite_existing);
         Editor(p).unlink("/seq0/h_prefill_stage");
       },
       "/seq0/h_prefill_stage: missing dataset"},
  };
  ASSERT_GE(cases.size(), 10u);
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string p = dir.file(c.name + ".h5");
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    c.make(p);
    try {
      read_dump(p);
      ADD_FAILURE() << c.name << ": read_dump accepted a malformed file";
    } catch (const FormatError& e) {
      EXPECT_EQ(e.file(), p);
      EXPECT_NE(std::string(e.what()).find(p + ": "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << "expected '" << c.needle << "' in\n"
                                                                         << e.what();
    }
    const Shell r = sh(std::string(SSMCHECK_BIN) + " diff " + q(good) + " " + q(p));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << "expected '" << c.needle << "' in\n" << r.out;
  }
  // the untouched files are fine
  EXPECT_EQ(sh(std::string(SSMCHECK_BIN) + " diff " + q(good) + " " + q(good)).code, 0);
}

// --- command line ------------------------------------------------------------------------------

TEST(compare_dump, cli_dump_then_diff) {
  TempDir dir;
  const std::string bin = SSMCHECK_BIN;
  const std::string dump = bin + " dump --preset odd-a --h-mode f16 --ops 'alloc; prefill 5; checkpoint; verify 3'";
  ASSERT_EQ(sh(dump + " --seed 3 -o " + q(dir.file("a.h5"))).code, 0);
  ASSERT_EQ(sh(dump + " --seed 3 -o " + q(dir.file("b.h5"))).code, 0);
  ASSERT_EQ(sh(dump + " --seed 4 -o " + q(dir.file("c.h5"))).code, 0);
  const Dump a = read_dump(dir.file("a.h5"));
  EXPECT_EQ(a.provenance.backend, "reference");
  EXPECT_EQ(a.provenance.seed, 3u);
  EXPECT_EQ(a.provenance.op_index, 3);
  EXPECT_EQ(a.pool.h_mode, HMode::f16);

  const Shell eq =
      sh(bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("b.h5")) + " --json " + q(dir.file("eq.json")));
  EXPECT_EQ(eq.code, 0) << eq.out;
  EXPECT_NE(eq.out.find("EQUAL within tolerance"), std::string::npos) << eq.out;

  const Shell ne =
      sh(bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("c.h5")) + " --json " + q(dir.file("ne.json")));
  EXPECT_EQ(ne.code, 1) << ne.out;
  EXPECT_NE(ne.out.find("op 3 'verify 3'"), std::string::npos) << ne.out;
  EXPECT_NE(ne.out.find("class fp16-state"), std::string::npos) << ne.out;
  std::ifstream jf(dir.file("ne.json"));
  const nlohmann::json j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["result"], "different");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_GT(j["report"]["failures"].size(), 0u);
  EXPECT_EQ(j["tolerances"]["fp16-state"]["max_ulp"], Tolerances::defaults().fp16_state.max_ulp);

  // tolerance flags: the file, then the command line on top; bad ones are exit 2
  {
    std::ofstream f(dir.file("tol.json"));
    f << R"({"output": {"atol": 0.5}})";
  }
  EXPECT_EQ(sh(bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("b.h5")) + " --tolerance-file " +
               q(dir.file("tol.json")) + " --tolerance fp16-state.max_ulp=4")
                .code,
            0);
  const Shell badtol =
      sh(bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("b.h5")) + " --tolerance fp16-state.bogus=1");
  EXPECT_EQ(badtol.code, 2) << badtol.out;
  EXPECT_NE(badtol.out.find("bogus"), std::string::npos) << badtol.out;
  EXPECT_EQ(sh(bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("missing.h5"))).code, 2);
  // incomparable dumps (different model) are bad input
  ASSERT_EQ(sh(bin + " dump --preset tiny --h-mode f16 --ops 'alloc' -o " + q(dir.file("t.h5"))).code, 0);
  const Shell inc = sh(bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("t.h5")) + " --json -");
  EXPECT_EQ(inc.code, 2) << inc.out;
  EXPECT_NE(inc.out.find("bad-input"), std::string::npos) << inc.out;
  // a script the contract refuses writes nothing
  EXPECT_EQ(sh(bin + " dump --ops 'alloc; commit 1 2' -o " + q(dir.file("r.h5"))).code, 2);
  EXPECT_FALSE(fs::exists(dir.file("r.h5")));
  // -o into a missing directory: created, and said so (as every output flag does)
  const Shell made = sh(bin + " dump --ops alloc -o " + q(dir.file("made/here/d.h5")));
  EXPECT_EQ(made.code, 0) << made.out;
  EXPECT_NE(made.out.find("created directory"), std::string::npos) << made.out;
  EXPECT_TRUE(fs::exists(dir.file("made/here/d.h5")));
  // nothing ran is not a pass: exit 5 (an empty script; a check in which both sides refused every op)
  EXPECT_EQ(sh(bin + " run --ops ''").code, 5);
  const Shell none = sh(bin + " check --backend reference --ops 'commit 1 1; release'");
  EXPECT_EQ(none.code, 5) << none.out;
  EXPECT_NE(none.out.find("nothing was checked"), std::string::npos) << none.out;
  // typos get a suggestion, exit 2
  const Shell typo = sh(bin + " replya x.h5");
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("unknown subcommand 'replya' (did you mean 'replay'?)"), std::string::npos) << typo.out;
  const Shell flag = sh(bin + " gate --casses 3");
  EXPECT_EQ(flag.code, 2);
  EXPECT_NE(flag.out.find("ssmcheck gate: unknown flag '--casses' (did you mean '--cases'?)"), std::string::npos)
      << flag.out;
  // numbers out of their range are refused, naming the flag (a negative seed used to wrap)
  for (const char* flags : {"--decay 7", "--value-scale -1", "--seed -3"}) {
    const Shell r = sh(bin + " dump --ops alloc " + flags + " -o " + q(dir.file("range.h5")));
    EXPECT_EQ(r.code, 2) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(std::string(flags).substr(0, std::string(flags).find(' '))), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir.file("range.h5"))) << flags;
  }
}

}  // namespace
}  // namespace ssm::cmp
