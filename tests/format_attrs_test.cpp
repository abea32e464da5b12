// Undefined attributes are refused by name (docs/trace-format.md: a member the format does not
// define is an error): a misspelt convention attribute on /model/layer0, a convention put on the
// wrong group, an attribute of the other layer kind, misspellings on ops, recorded states, datasets
// and dumps; the conventions the format defines read back; every bundled trace still reads.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>

#include "formats/dump.h"
#include "formats/hdf5_file.h"
#include "formats/trace.h"

namespace ssm::formats {
namespace {

namespace fs = std::filesystem;

Model zero_model(const ModelSpec& spec) {
  Model m;
  m.spec = spec;
  for (const LayerSpec& s : spec.layers) {
    LayerWeights w;
    for (const WeightField& f : s.weights()) {
      size_t n = 1;
      for (int64_t d : f.shape) n *= size_t(d);
      w.*f.member = std::vector<float>(n, 0.25f);
    }
    m.weights.push_back(std::move(w));
  }
  return m;
}

SequenceState zero_state(const ModelSpec& spec) {
  SequenceState s;
  s.slot = 0;
  for (const LayerSpec& l : spec.layers) {
    LayerState L;
    L.h = Tensor::zeros(DType::f32, h_shape(l));
    L.conv = Tensor::zeros(DType::f32, conv_shape(l));
    s.layers.push_back(std::move(L));
  }
  return s;
}

class FormatAttrs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("format_attrs_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A tiny trace (GDN layers, or the preset's; torch gates on layer 1): alloc, then a state of sequence 0.
  std::string trace(const std::string& name, const std::string& preset = "tiny") {
    TraceHeader h;
    h.producer = "format_attrs_test";
    h.model = zero_model(make_preset(preset));
    h.model.spec.layers[1].numerics.gates = GateMath::torch;
    h.pool.max_slots = 2;
    h.pool.h_capacity = {4, 4};
    TraceOp alloc;
    alloc.op = parse_op("alloc");
    TraceOp release = alloc;
    TraceState st;
    st.seq = 0;
    st.layers = {0, 1};
    st.state = zero_state(h.model.spec);
    release.states.push_back(st);
    const std::string path = (dir_ / name).string();
    write_trace(path, h, {alloc, release});
    return path;
  }

  // Adds a string attribute `name` to the object at `object` of `path`.
  static void add_attr(const std::string& path, const std::string& object, const std::string& name) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0) << path;
    const hid_t o = H5Oopen(f, object.c_str(), H5P_DEFAULT);
    ASSERT_GE(o, 0) << object;
    h5::write_attr_str(o, name, "torch");
    H5Oclose(o);
    H5Fclose(f);
  }

  // The error reading `path` (a trace, or a dump), "" when it reads.
  static std::string trace_error(const std::string& path) {
    try {
      (void)read_trace(path);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(FormatAttrs, AMisspeltConventionOnALayerIsRefusedNamingIt) {
  const std::string p = trace("gate.h5");
  ASSERT_EQ(trace_error(p), "");
  add_attr(p, "/model/layer0", "gate");
  const std::string e = trace_error(p);
  EXPECT_NE(e.find(p + ": /model/layer0@gate: not a member of /model/layer0 (defined: kind, nk, nv, kd, vd, d_conv, "
                       "conv_bias, output_gate, gates, f16_store, f16_rows, eps, name, ple_channels"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("; did you mean gates?"), std::string::npos) << e;
}

TEST_F(FormatAttrs, AConventionOnTheWrongGroupSaysWhereItBelongs) {
  for (const std::string object : {"/model", "/", "/pool", "/ops/000000"}) {
    const std::string p = trace("wrong_group" + std::to_string(object.size()) + ".h5");
    add_attr(p, object, "f16_rows");
    const std::string at = object == "/" ? "/@f16_rows" : object + "@f16_rows";
    const std::string e = trace_error(p);
    EXPECT_NE(e.find(p + ": " + at + ": not a member of " + object + " (defined: "), std::string::npos) << e;
    EXPECT_NE(e.find("f16_rows is a layer's convention: it belongs on /model/layer<l>"), std::string::npos) << e;
  }
}

// An attribute of the other layer kind names the layer's kind and offers its counterpart.
TEST_F(FormatAttrs, AnAttributeOfTheOtherLayerKindNamesTheKindAndItsCounterpart) {
  struct Case {
    const char* preset;
    const char* attr;
    const char* expect;
  };
  const Case cases[] = {
      {"tiny", "ng", "; ng is a mamba2 layer's attribute and this layer is gdn: did you mean nk?"},
      {"tiny", "nh", "; nh is a mamba2 layer's attribute and this layer is gdn: did you mean nv?"},
      {"tiny", "hp", "; hp is a mamba2 layer's attribute and this layer is gdn: did you mean vd?"},
      {"tiny", "norm_groups", "; norm_groups is a mamba2 layer's attribute and this layer is gdn (no gdn counterpart)"},
      {"mamba-tiny", "nk", "; nk is a gdn layer's attribute and this layer is mamba2: did you mean ng?"},
      {"mamba-tiny", "kd", "; kd is a gdn layer's attribute and this layer is mamba2: did you mean ns?"},
      {"mamba-tiny", "output_gate",
       "; output_gate is a gdn layer's attribute and this layer is mamba2 (no mamba2 counterpart)"},
      {"mamba-tiny", "ple_channels", "; ple_channels is a gdn layer's attribute and this layer is mamba2"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string p = trace("kind" + std::to_string(n++) + ".h5", c.preset);
    ASSERT_EQ(trace_error(p), "") << c.preset;
    add_attr(p, "/model/layer0", c.attr);
    const std::string e = trace_error(p);
    EXPECT_NE(e.find(p + ": /model/layer0@" + c.attr + ": not a member of /model/layer0 (defined: kind, "),
              std::string::npos)
        << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected: " << c.expect << "\n" << e;
  }
}

TEST_F(FormatAttrs, MisspellingsEverywhereAreRefused) {
  struct Case {
    const char* object;
    const char* attr;
    const char* expect;
  };
  const Case cases[] = {
      {"/model/layer0", "nh", "/model/layer0@nh: not a member of /model/layer0"},  // a Mamba-2 shape on a GDN layer
      {"/model/layer0/A_log", "units",
       "/model/layer0/A_log@units: not a member of /model/layer0/A_log (defined: no attributes)"},
      {"/ops/000000", "refusal",
       "/ops/000000@refusal: not a member of /ops/000000 (defined: op, refused, states_dropped); did you mean refused?"},
      {"/ops/000001/state/seq0", "last_verify", "did you mean last_verify_k?"},
      {"/ops/000001/state/seq0/layer1", "conv_oldest_column_abset", "did you mean conv_oldest_column_absent?"},
      {"/ops/000001/state/seq0/layer0/h", "layuot",
       "/ops/000001/state/seq0/layer0/h@layuot: not a member of "
       "/ops/000001/state/seq0/layer0/h (defined: dtype, layout); did you mean layout?"},
      {"/", "produce", "/@produce: not a member of / (defined: format, version, producer"},
      {"/pool", "slots",
       "/pool@slots: not a member of /pool (defined: max_slots, h_capacity, conv_capacity, snapshot_slots)"},
  };
  int n = 0;
  for (const Case& c : cases) {
    const std::string p = trace("case" + std::to_string(n++) + ".h5");
    add_attr(p, c.object, c.attr);
    const std::string e = trace_error(p);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.object << "@" << c.attr << ": " << e;
  }
  EXPECT_EQ(n, 8);
}

TEST_F(FormatAttrs, TheDefinedConventionsReadBack) {
  const Trace t = read_trace(trace("conventions.h5"));
  ASSERT_EQ(t.header.model.spec.layers.size(), 2u);
  EXPECT_EQ(t.header.model.spec.layers[0].numerics.gates, GateMath::clamped);
  EXPECT_EQ(t.header.model.spec.layers[1].numerics.gates, GateMath::torch);
}

TEST_F(FormatAttrs, DumpsRefuseUndefinedAttributesToo) {
  Dump d;
  d.provenance.backend = "reference";
  d.spec = make_preset("tiny");
  d.pool.max_slots = 2;
  d.pool.h_capacity = {4, 4};
  d.sequences.push_back(DumpSequence{0, zero_state(d.spec)});
  const std::string p = (dir_ / "dump.h5").string();
  write_dump(p, d);
  ASSERT_NO_THROW(read_dump(p));
  for (const auto& [object, attr, expect] :
       {std::tuple{"/", "sequence", "/@sequence: not a member of / (defined: format, version"},
        std::tuple{"/model/layer1", "f16_stor", "/model/layer1@f16_stor: not a member of /model/layer1"},
        std::tuple{"/seq0/layer0", "h_is_fp16", "did you mean h_is_f16?"}}) {
    write_dump(p, d);
    add_attr(p, object, attr);
    try {
      (void)read_dump(p);
      ADD_FAILURE() << object << "@" << attr << " was accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
}

TEST_F(FormatAttrs, EveryBundledTraceStillReads) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(SSMCHECK_SOURCE_DIR) / "fixtures" / "traces")) {
    if (e.path().extension() != ".h5") continue;
    EXPECT_EQ(trace_error(e.path().string()), "") << e.path();
    ++n;
  }
  EXPECT_GE(n, 20);  // 12 golden and 11 faulty traces today
}

}  // namespace
}  // namespace ssm::formats
