// The capture ABI by name (capture/ssmcheck_capture.h, ABI minor 6): a trace captured entirely by
// name (ssmc_add_layer_by_name with the trace format's attributes, ssmc_set_layer_weight,
// ssmc_op_input, ssmc_op_output) from a model mixing a GDN layer hosting a PLE carry with torch
// gates, a Mamba-2 layer with norm_groups 1, dt limits and the norm before the gate, and a GDN
// layer with a sigmoid gate equals, byte for byte and op for op, the same recording captured
// through the per-kind calls, synchronously and asynchronously, and replays; misspelt attribute,
// weight, input and output names and wrong counts are refused naming them and change nothing; the
// geometry query (ssmc_layer_fields, ssmc_layer_field) answers LayerSpec's shapes under the
// layer's conventions. No GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <fmt/core.h>
#include <fstream>
#include <iterator>
#include <set>

#include "capture/ssmcheck_capture.h"
#include "core/conventions.h"
#include "core/layer_attrs.h"
#include "fixtures/generators.h"
#include "tests/support/capture_abi.h"
#include "tests/support/trace_support.h"
#include "tests/support/file_bytes.h"

namespace ssm::test {
namespace {

const char* kScript =
    "alloc; prefill 3; checkpoint; alloc @1; decode @0,1; verify 3 @1,0; commit 2 3 @1; decode @1,pad,0; "
    "verify 2 wy @0; rollback 0";

ModelSpec mixed_spec() {
  ModelSpec m;
  m.name = "by-name mixed";
  LayerSpec g;  // GDN hosting a PLE carry, torch gates
  g.nk = 1, g.nv = 2, g.kd = 4, g.vd = 6, g.d_conv = 4, g.conv_bias = true, g.eps = 1e-6f;
  g.numerics.gates = GateMath::torch;
  g.ple = PleSpec{3, 3, 2, 2, 1};
  LayerSpec mb;  // Mamba-2: HF's whole-width norm, dt limits, norm before the gate
  mb.kind = LayerKind::mamba2;
  mb.nh = 4, mb.hp = 6, mb.ns = 5, mb.ng = 2, mb.d_conv = 4, mb.conv_bias = true, mb.eps = 1e-5f;
  mb.norm_groups = 1, mb.dt_min = 0.01f, mb.dt_max = 0.75f, mb.norm_before_gate = true;
  LayerSpec g2;  // plain GDN, sigmoid gate, no conv bias
  g2.nk = 2, g2.nv = 4, g2.kd = 4, g2.vd = 4, g2.d_conv = 3, g2.output_gate = OutputGate::sigmoid;
  m.layers = {g, mb, g2};
  for (const LayerSpec& s : m.layers) s.validate();
  return m;
}

const Recorded& recorded() {
  static const Recorded r = [] {
    const CaseConfig cfg = case_of("tiny", HMode::f32, 17);
    std::printf("seed %llu\n", (unsigned long long)cfg.gen.seed);
    return record_model(cfg, make_model(mixed_spec(), cfg.gen), kScript);
  }();
  return r;
}

ssmc_trace* open_pool(const formats::TraceHeader& h, const std::string& path) {
  ssmc_trace* t = nullptr;
  EXPECT_EQ(
      ssmc_open(path.c_str(), "by-name test", "reference", h.model.spec.name.c_str(), to_string(h.pool.h_mode), &t),
      SSMC_OK)
      << ssmc_last_error();
  const PoolConfig& p = h.pool;
  EXPECT_EQ(ssmc_set_pool(t, p.max_slots, p.h_capacity.empty() ? nullptr : p.h_capacity.data(), p.conv_capacity,
                          p.snapshot_slots),
            SSMC_OK)
      << ssmc_last_error();
  return t;
}

const float* ptr(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

// The per-kind calls of minors 0..4: ssmc_add_layer / ssmc_add_mamba2_layer, ssmc_set_layer_ple,
// the numerics and norm_groups by ssmc_set_layer_convention.
ssmc_trace* open_old(const formats::TraceHeader& h, const std::string& path) {
  ssmc_trace* t = open_pool(h, path);
  for (size_t l = 0; l < h.model.spec.layers.size(); ++l) {
    const LayerSpec& s = h.model.spec.layers[l];
    const LayerWeights& w = h.model.weights[l];
    const int L = int(l);
    if (s.kind == LayerKind::gdn) {
      const ssmc_layer_desc d = {s.nk, s.nv, s.kd, s.vd, s.d_conv, s.conv_bias, s.output_gate == OutputGate::sigmoid,
                                 s.eps};
      EXPECT_EQ(
          ssmc_add_layer(t, &d, w.conv_w.data(), ptr(w.conv_bias), w.A_log.data(), w.dt_bias.data(), w.norm_w.data()),
          SSMC_OK)
          << ssmc_last_error();
      if (s.ple.hosted()) {
        const ssmc_ple_desc p = {s.ple.channels, s.ple.ngram_size, s.ple.k_size, s.ple.dilation, s.ple.eos_id};
        EXPECT_EQ(ssmc_set_layer_ple(t, L, &p, w.ple_w.data()), SSMC_OK) << ssmc_last_error();
      }
    } else {
      ssmc_mamba2_layer_desc d{};
      d.nh = s.nh, d.hp = s.hp, d.ns = s.ns, d.ng = s.ng, d.d_conv = s.d_conv, d.conv_bias = s.conv_bias;
      d.norm_before_gate = s.norm_before_gate, d.dt_min = s.dt_min, d.dt_max = s.dt_max, d.eps = s.eps;
      EXPECT_EQ(ssmc_add_mamba2_layer(t, &d, w.conv_w.data(), ptr(w.conv_bias), w.A_log.data(), w.dt_bias.data(),
                                      w.D.data(), w.norm_w.data()),
                SSMC_OK)
          << ssmc_last_error();
      if (s.norm_groups) {
        EXPECT_EQ(ssmc_set_layer_convention(t, L, "norm_groups", std::to_string(s.norm_groups).c_str()), SSMC_OK);
      }
    }
    if (s.numerics.gates != GateMath::clamped) {
      EXPECT_EQ(ssmc_set_layer_convention(t, L, "gates", to_string(s.numerics.gates)), SSMC_OK) << ssmc_last_error();
    }
  }
  return t;
}

// Minor 6: each layer by its attributes (the trace format's, as core/layer_attrs.h writes them),
// each weight by its name.
ssmc_trace* open_by_name(const formats::TraceHeader& h, const std::string& path) {
  ssmc_trace* t = open_pool(h, path);
  for (size_t l = 0; l < h.model.spec.layers.size(); ++l) {
    const LayerSpec& s = h.model.spec.layers[l];
    std::vector<const char*> names, values;
    const std::vector<LayerAttr> attrs = layer_attrs(s);
    for (const LayerAttr& a : attrs) {
      if (a.name == "kind") continue;
      names.push_back(a.name.c_str());
      values.push_back(a.value.c_str());
    }
    int index = -1;
    EXPECT_EQ(ssmc_add_layer_by_name(t, to_string(s.kind), int(names.size()), names.data(), values.data(), &index),
              SSMC_OK)
        << ssmc_last_error();
    EXPECT_EQ(index, int(l));
    for (const WeightField& f : s.weights()) {
      const std::vector<float>& v = h.model.weights[l].*f.member;
      EXPECT_EQ(ssmc_set_layer_weight(t, int(l), f.name, v.data(), int64_t(v.size())), SSMC_OK) << ssmc_last_error();
    }
  }
  return t;
}

std::vector<int32_t> ids_of(const std::vector<float>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

#define SSMC_TRY(call)              \
  do {                              \
    const ssmc_status st_ = (call); \
    if (st_ != SSMC_OK) return st_; \
  } while (0)

// One recorded op; by_name: inputs and outputs by ssmc_op_input / ssmc_op_output (token ids as
// SSMC_F32 when ids_f32, else SSMC_I32), else by ssmc_op_inputs / _ple_inputs / _outputs / _ple_outputs.
ssmc_status capture(ssmc_trace* t, const ModelSpec& spec, const formats::TraceOp& op, bool by_name, bool ids_f32) {
  SSMC_TRY(ssmc_begin_op(t, to_string(op.op).c_str()));
  if (op.refused) SSMC_TRY(ssmc_op_refused(t, to_string(*op.refused)));
  for (size_t e = 0; e < op.inputs.size(); ++e)
    for (size_t l = 0; l < op.inputs[e].layers.size(); ++l) {
      const LayerSpec& s = spec.layers[l];
      const LayerRows& r = op.inputs[e].layers[l];
      const int E = int(e), L = int(l);
      if (by_name) {
        for (const InputField& f : s.inputs()) {
          const std::vector<float>& v = r.*f.member;
          if (f.member == &LayerRows::ple_tokens && !ids_f32) {
            const std::vector<int32_t> ids = ids_of(v);
            SSMC_TRY(ssmc_op_input(t, E, L, f.name, SSMC_I32, ids.data(), SSMC_HOST));
          } else {
            SSMC_TRY(ssmc_op_input(t, E, L, f.name, SSMC_F32, ptr(v), SSMC_HOST));
          }
        }
        continue;
      }
      SSMC_TRY(ssmc_op_inputs(t, E, L, ptr(r.conv_in), ptr(r.dt_in), ptr(r.beta_in), ptr(r.gate_in), SSMC_HOST));
      if (s.ple.hosted()) {
        const std::vector<int32_t> ids = ids_of(r.ple_tokens);
        SSMC_TRY(ssmc_op_ple_inputs(t, E, L, ids.data(), ptr(r.ple_x), SSMC_HOST));
      }
    }
  for (size_t e = 0; e < op.outputs.size(); ++e)
    if (op.outputs[e])
      for (size_t l = 0; l < spec.layers.size(); ++l) {
        const StepOutputs& o = *op.outputs[e];
        const bool ple = spec.layers[l].ple.hosted();
        if (by_name) {
          SSMC_TRY(ssmc_op_output(t, int(e), int(l), "out", o.layers[l].data(), SSMC_HOST));
          if (ple) SSMC_TRY(ssmc_op_output(t, int(e), int(l), "ple_out", o.ple[l].data(), SSMC_HOST));
        } else {
          SSMC_TRY(ssmc_op_outputs(t, int(e), int(l), o.layers[l].data(), SSMC_HOST));
          if (ple) SSMC_TRY(ssmc_op_ple_outputs(t, int(e), int(l), o.ple[l].data(), SSMC_HOST));
        }
      }
  for (const formats::TraceState& ts : op.states) {
    const SequenceState& s = ts.state;
    SSMC_TRY(ssmc_state_begin(t, ts.seq, s.slot, s.last_verify_k));
    auto put = [&](int l, const char* field, int index, const Tensor& x) {
      const ssmc_dtype dt = x.dtype() == DType::f16 ? SSMC_F16 : SSMC_F32;
      return ssmc_state_tensor(t, ts.seq, l, field, index, dt, x.raw(), SSMC_HOST);
    };
    if (s.h_prefill_stage) SSMC_TRY(put(0, "h_prefill_stage", 0, *s.h_prefill_stage));
    for (size_t i = 0; i < ts.layers.size(); ++i) {
      const LayerState& ls = s.layers[i];
      const int l = ts.layers[i];
      SSMC_TRY(put(l, "h", 0, ls.h));
      SSMC_TRY(put(l, "conv", 0, ls.conv));
      if (ls.h_checkpoint) SSMC_TRY(put(l, "h_checkpoint", 0, *ls.h_checkpoint));
      if (ls.conv_checkpoint) SSMC_TRY(put(l, "conv_checkpoint", 0, *ls.conv_checkpoint));
      for (size_t k = 0; k < ls.h_intermediates.size(); ++k)
        SSMC_TRY(put(l, "h_intermediate", int(k), ls.h_intermediates[k]));
      for (size_t k = 0; k < ls.conv_intermediates.size(); ++k)
        SSMC_TRY(put(l, "conv_intermediate", int(k), ls.conv_intermediates[k]));
      if (ls.ple) {
        SSMC_TRY(put(l, "ple_history", 0, ls.ple->history));
        SSMC_TRY(put(l, "ple_conv", 0, ls.ple->conv));
      }
      if (ls.ple_checkpoint) {
        SSMC_TRY(put(l, "ple_history_checkpoint", 0, ls.ple_checkpoint->history));
        SSMC_TRY(put(l, "ple_conv_checkpoint", 0, ls.ple_checkpoint->conv));
      }
      for (size_t k = 0; k < ls.ple_snapshots.size(); ++k) {
        SSMC_TRY(put(l, "ple_history_snapshot", int(k), ls.ple_snapshots[k].history));
        SSMC_TRY(put(l, "ple_conv_snapshot", int(k), ls.ple_snapshots[k].conv));
      }
    }
  }
  return ssmc_end_op(t);
}
#undef SSMC_TRY

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// `got` holds the recording: every layer's attributes and weights, every op's inputs (the PLE
// ones too), outputs (ple_out too) and states (the PLE carry's fields too), bit for bit.
void expect_recording(const Recorded& r, const formats::Trace& got) {
  const ModelSpec& want = r.header.model.spec;
  ASSERT_EQ(got.header.model.spec.layers.size(), want.layers.size());
  for (size_t l = 0; l < want.layers.size(); ++l) {
    SCOPED_TRACE(fmt::format("layer {}", l));
    const std::vector<LayerAttr> a = layer_attrs(want.layers[l]), b = layer_attrs(got.header.model.spec.layers[l]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].value, b[i].value) << a[i].name;
    }
    for (const WeightField& f : want.layers[l].weights())
      EXPECT_EQ(r.header.model.weights[l].*f.member, got.header.model.weights[l].*f.member) << f.name;
  }
  ASSERT_EQ(got.ops.size(), r.ops.size());
  for (size_t i = 0; i < r.ops.size(); ++i) {
    SCOPED_TRACE(fmt::format("op {} '{}'", i, to_string(r.ops[i].op)));
    const formats::TraceOp& a = r.ops[i];
    const formats::TraceOp& b = got.ops[i];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.refused, b.refused);
    ASSERT_EQ(a.inputs.size(), b.inputs.size());
    for (size_t e = 0; e < a.inputs.size(); ++e)
      for (size_t l = 0; l < a.inputs[e].layers.size(); ++l)
        for (const InputField& f : want.layers[l].inputs())
          EXPECT_EQ(a.inputs[e].layers[l].*f.member, b.inputs[e].layers[l].*f.member) << "entry " << e << " " << f.name;
    ASSERT_EQ(a.outputs.size(), b.outputs.size());
    for (size_t e = 0; e < a.outputs.size(); ++e) {
      ASSERT_EQ(a.outputs[e].has_value(), b.outputs[e].has_value());
      if (!a.outputs[e]) continue;
      EXPECT_EQ(a.outputs[e]->layers, b.outputs[e]->layers);
      for (size_t l = 0; l < want.layers.size(); ++l)
        if (want.layers[l].ple.hosted()) {
          EXPECT_EQ(a.outputs[e]->ple[l], b.outputs[e]->ple[l]);
        }
    }
    ASSERT_EQ(a.states.size(), b.states.size());
    for (size_t s = 0; s < a.states.size(); ++s) {
      const SequenceState& x = a.states[s].state;
      const SequenceState& y = b.states[s].state;
      EXPECT_EQ(x.last_verify_k, y.last_verify_k);
      ASSERT_EQ(x.layers.size(), y.layers.size());
      for (size_t l = 0; l < x.layers.size(); ++l) {
        EXPECT_TRUE(same_tensor(x.layers[l].h, y.layers[l].h));
        EXPECT_TRUE(same_tensor(x.layers[l].conv, y.layers[l].conv));
        ASSERT_EQ(x.layers[l].ple.has_value(), y.layers[l].ple.has_value());
        if (x.layers[l].ple) {
          EXPECT_TRUE(same_tensor(x.layers[l].ple->history, y.layers[l].ple->history));
          EXPECT_TRUE(same_tensor(x.layers[l].ple->conv, y.layers[l].ple->conv));
        }
        EXPECT_EQ(x.layers[l].ple_snapshots.size(), y.layers[l].ple_snapshots.size());
        EXPECT_EQ(x.layers[l].h_intermediates.size(), y.layers[l].h_intermediates.size());
      }
    }
  }
}

void expect_replays(const std::string& path, size_t ops) {
  const Shell rep = sh(std::string(SSMCHECK_BIN) + " replay " + q(path));
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find(fmt::format("AGREE: {} ops", ops)), std::string::npos) << rep.out;
}

TEST(CaptureByName, TheLibraryIsMinorSix) { EXPECT_GE(ssmc_abi_minor(), 6); }

TEST(CaptureByName, TheRecordingCoversWhatItClaims) {
  const Recorded& r = recorded();
  bool ple_state = false, ple_snapshot = false, ple_out = false, refused = false;
  for (const formats::TraceOp& op : r.ops) {
    refused |= op.refused.has_value();
    for (const auto& o : op.outputs) ple_out |= o && !o->ple.empty() && !o->ple[0].empty();
    for (const formats::TraceState& s : op.states)
      for (const LayerState& ls : s.state.layers) {
        ple_state |= ls.ple.has_value();
        ple_snapshot |= !ls.ple_snapshots.empty();
      }
  }
  EXPECT_TRUE(ple_state && ple_snapshot && ple_out) << "the PLE carry's states, snapshots and outputs are exercised";
  EXPECT_EQ(r.header.model.spec.layers[0].numerics.gates, GateMath::torch);
  // the attribute names an engine spells are the trace format's (core/layer_attrs.h writes them)
  const std::set<std::pair<std::string, std::string>> literal = {{"nh", "4"},
                                                                 {"hp", "6"},
                                                                 {"ns", "5"},
                                                                 {"ng", "2"},
                                                                 {"d_conv", "4"},
                                                                 {"conv_bias", "1"},
                                                                 {"norm_before_gate", "1"},
                                                                 {"norm_groups", "1"},
                                                                 {"dt_min", "0.01"},
                                                                 {"dt_max", "0.75"},
                                                                 {"eps", "1e-05"}};
  std::set<std::pair<std::string, std::string>> written;
  for (const LayerAttr& a : layer_attrs(r.header.model.spec.layers[1]))
    if (a.name != "kind") written.insert({a.name, a.value});
  EXPECT_EQ(literal, written);
  (void)refused;
}

TEST(CaptureByName, ATraceCapturedByNameEqualsThePerKindCaptureObjectForObjectAndReplays) {
  TempDir d;
  const Recorded& r = recorded();
  const ModelSpec& spec = r.header.model.spec;
  struct Way {
    const char* file;
    bool by_name, ids_f32, async;
  };
  const Way ways[] = {{"old.h5", false, false, false},
                      {"by_name.h5", true, false, false},
                      {"by_name_f32_ids.h5", true, true, false},
                      {"by_name_async.h5", true, true, true},
                      {"old_async.h5", false, false, true}};
  for (const Way& w : ways) {
    SCOPED_TRACE(w.file);
    ssmc_trace* t = w.by_name ? open_by_name(r.header, d.file(w.file)) : open_old(r.header, d.file(w.file));
    ASSERT_NE(t, nullptr);
    if (w.async) {
      ASSERT_EQ(ssmc_set_async(t, 0, SSMC_BLOCK), SSMC_OK) << ssmc_last_error();
    }
    for (const formats::TraceOp& op : r.ops)
      ASSERT_EQ(capture(t, spec, op, w.by_name, w.ids_f32), SSMC_OK) << to_string(op.op) << ": " << ssmc_last_error();
    ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
    expect_recording(r, formats::read_trace(d.file(w.file)));
  }
  // Byte for byte: one writer, the same content (docs/trace-format.md). When they differ, h5diff
  // (hdf5-tools) says where, object for object. (Before 9cd5f13 they did differ in some runs, in the
  // time stamps of the superblock extension a non-default free-space strategy added.)
  const auto bytes = [&](const char* file) { return test::file_bytes(d.file(file)); };
  const std::string old_bytes = bytes("old.h5");
  ASSERT_FALSE(old_bytes.empty());
  for (const Way& w : ways) {
    if (bytes(w.file) == old_bytes) continue;
    const Shell diff = sh("h5diff " + q(d.file("old.h5")) + " " + q(d.file(w.file)) + " 2>&1 | head -40");
    ADD_FAILURE() << w.file << " is not old.h5 byte for byte; h5diff (exit " << diff.code << "): " << diff.out;
  }
  expect_replays(d.file("by_name.h5"), r.ops.size());
  expect_replays(d.file("by_name_async.h5"), r.ops.size());
}

// tests/support/capture_abi.h's by-name way (the GPU test's, capture_async_gpu_test.cpp) on the host:
// an asynchronous capture of a GDN preset by name is the per-kind capture object for object.
TEST(CaptureByName, TheSharedCaptureHelperByNameEqualsItsPerKindWay) {
  TempDir d;
  const Recorded r = record(case_of("odd-a", HMode::f16, 5), kScript);
  for (const bool by_name : {false, true}) {
    ssmc_trace* t = open_for(r, d.file(by_name ? "n.h5" : "k.h5"), by_name);
    ASSERT_NE(t, nullptr) << ssmc_last_error();
    ASSERT_EQ(ssmc_set_async(t, 0, SSMC_BLOCK), SSMC_OK) << ssmc_last_error();
    for (const formats::TraceOp& op : r.ops)
      ASSERT_EQ(capture_op(t, r.header.model.spec, op, SSMC_HOST, nullptr, nullptr, by_name), SSMC_OK)
          << ssmc_last_error();
    ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  }
  const std::string kb = test::file_bytes(d.file("k.h5")), nb = test::file_bytes(d.file("n.h5"));
  EXPECT_FALSE(kb.empty());
  EXPECT_TRUE(kb == nb) << "the captures by name and per kind differ; h5diff: "
                        << sh("h5diff " + q(d.file("k.h5")) + " " + q(d.file("n.h5")) + " 2>&1 | head -40").out;
  expect_replays(d.file("n.h5"), r.ops.size());
}

TEST(CaptureByName, TheGeometryQueryAnswersTheLayerSpecsShapesUnderTheConventions) {
  TempDir d;
  const Recorded& r = recorded();
  const ModelSpec& spec = r.header.model.spec;
  ssmc_trace* t = open_by_name(r.header, d.file("g.h5"));
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(ssmc_set_layer_convention(t, 1, "conv_window", "d_conv-1"), SSMC_OK);
  ASSERT_EQ(ssmc_set_layer_convention(t, 1, "h_layout", "nv,vd,kd"), SSMC_OK);
  auto group = [&](int l, const char* g) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> v;
    const int n = ssmc_layer_fields(t, l, g);
    EXPECT_GE(n, 0) << ssmc_last_error();
    for (int i = 0; i < n; ++i) {
      const char* name = nullptr;
      int rank = -1;
      int64_t dims[4] = {-1, -1, -1, -1};
      EXPECT_EQ(ssmc_layer_field(t, l, g, i, &name, &rank, dims), SSMC_OK) << ssmc_last_error();
      v.push_back({name, std::vector<int64_t>(dims, dims + rank)});
    }
    return v;
  };
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    SCOPED_TRACE(fmt::format("layer {}", l));
    const LayerSpec& s = spec.layers[l];
    const StateLayout lay = l == 1 ? StateLayout{ConvWindow::d_conv_minus_1, HLayout::vd_kd} : StateLayout{};
    std::vector<std::pair<std::string, std::vector<int64_t>>> in, w, out, st;
    for (const InputField& f : s.inputs()) in.push_back({f.name, {f.width}});
    for (const WeightField& f : s.weights()) w.push_back({f.name, f.shape});
    out.push_back({"out", {s.out_dim()}});
    if (s.ple.hosted()) out.push_back({"ple_out", {s.ple.channels}});
    for (const StateField& f : s.state_fields()) {
      const std::string n = f.name;
      st.push_back({n, n[0] == 'h' ? h_shape_in(s, lay) : n.rfind("conv", 0) == 0 ? conv_shape_in(s, lay) : f.shape});
    }
    EXPECT_EQ(group(int(l), "inputs"), in);
    EXPECT_EQ(group(int(l), "weights"), w);
    EXPECT_EQ(group(int(l), "outputs"), out);
    EXPECT_EQ(group(int(l), "state"), st);
    for (const auto& [name, dims] : st) {  // ssmc_state_field_shape agrees, the PLE fields included
      int64_t x[4];
      const int n = ssmc_state_field_shape(t, int(l), name.c_str(), x);
      EXPECT_EQ(std::vector<int64_t>(x, x + std::max(n, 0)), dims) << name;
    }
  }
  EXPECT_EQ(group(1, "state")[0].second, (std::vector<int64_t>{4, 5, 6})) << "Mamba-2 h [nh][ns][hp] as declared";
  EXPECT_EQ(group(1, "state")[1].second, (std::vector<int64_t>{spec.layers[1].conv_dim(), 3})) << "conv d_conv-1";
  EXPECT_EQ(ssmc_layer_fields(t, 0, "input"), -1);
  EXPECT_NE(std::string(ssmc_last_error()).find("unknown group 'input' (known: inputs, weights, outputs, state)"),
            std::string::npos)
      << ssmc_last_error();
  EXPECT_EQ(ssmc_layer_fields(t, 3, "inputs"), -1);
  EXPECT_NE(std::string(ssmc_last_error()).find("layer 3 outside 0..2"), std::string::npos) << ssmc_last_error();
  const char* name = nullptr;
  int rank = 0;
  int64_t dims[4];
  EXPECT_EQ(ssmc_layer_field(t, 1, "inputs", 3, &name, &rank, dims), SSMC_ERR_ARGUMENT);
  EXPECT_NE(std::string(ssmc_last_error()).find("inputs field 3 outside 0..2"), std::string::npos) << ssmc_last_error();
  ssmc_abandon(t);
}

// Expects `st` and a message holding every one of `needles`.
void expect_refused(ssmc_status st, ssmc_status want, std::initializer_list<const char*> needles) {
  EXPECT_EQ(st, want);
  const std::string why = ssmc_last_error();
  for (const char* n : needles) EXPECT_NE(why.find(n), std::string::npos) << "'" << n << "' not in: " << why;
}

TEST(CaptureByName, MisspeltAttributesAndWeightsAreRefusedByNameAndAddNothing) {
  TempDir d;
  const Recorded& r = recorded();
  ssmc_trace* t = open_by_name(r.header, d.file("m.h5"));
  ASSERT_NE(t, nullptr);
  const char* gdn_n[] = {"nk", "nv", "kd", "vd", "d_conv", "conv_bias", "eps"};
  const char* gdn_v[] = {"1", "2", "4", "4", "4", "0", "1e-6"};
  auto add = [&](const char* kind, std::vector<const char*> n, std::vector<const char*> v) {
    int layer = -7;
    const ssmc_status st = ssmc_add_layer_by_name(t, kind, int(n.size()), n.data(), v.data(), &layer);
    if (st != SSMC_OK) {
      EXPECT_EQ(layer, -7) << "a refused call writes no index";
    }
    return st;
  };
  std::vector<const char*> n(std::begin(gdn_n), std::end(gdn_n)), v(std::begin(gdn_v), std::end(gdn_v));
  auto with = [](std::vector<const char*> x, size_t i, const char* y) {
    x[i] = y;
    return x;
  };
  expect_refused(add("gdn", with(n, 0, "nkk"), v), SSMC_ERR_ARGUMENT,
                 {"ssmc_add_layer_by_name: layer 3", "'nkk' is not an attribute of a gdn layer", "did you mean nk?"});
  expect_refused(add("gdn", with(n, 1, "nk"), v), SSMC_ERR_ARGUMENT, {"'nk' is given twice"});
  expect_refused(add("gdn", n, with(v, 2, "four")), SSMC_ERR_ARGUMENT, {"kd: 'four' is not an integer"});
  expect_refused(add("gdn", {n.begin(), n.end() - 1}, {v.begin(), v.end() - 1}), SSMC_ERR_ARGUMENT,
                 {"'eps' is required for a gdn layer"});
  expect_refused(add("gdm", n, v), SSMC_ERR_ARGUMENT, {"kind:"});
  expect_refused(add("gdn", with(n, 0, "ns"), v), SSMC_ERR_ARGUMENT, {"it is a mamba2 layer's"});
  expect_refused(add("gdn", with(n, 6, "conv_window"), with(v, 6, "d_conv-1")), SSMC_ERR_ARGUMENT,
                 {"'conv_window' is a layout", "ssmc_set_layer_convention"});
  EXPECT_EQ(ssmc_layer_fields(t, 3, "inputs"), -1) << "no refused call added a layer";

  // weights: a misspelt name lists the layer's, a wrong count names both, nothing changes
  const std::vector<float> four(4, 0.5f), nan_four = {0.5f, std::nanf(""), 0.5f, 0.5f};
  expect_refused(ssmc_set_layer_weight(t, 1, "d", four.data(), 4), SSMC_ERR_ARGUMENT,
                 {"ssmc_set_layer_weight: layer 1: 'd' is not a weight of the mamba2 layer",
                  "(its weights: conv_w, conv_bias, A_log, dt_bias, D, norm_w)", "did you mean D?"});
  expect_refused(ssmc_set_layer_weight(t, 1, "D", four.data(), 3), SSMC_ERR_ARGUMENT,
                 {"layer 1 weight D [4]: count 3, expected 4"});
  expect_refused(ssmc_set_layer_weight(t, 1, "D", nan_four.data(), 4), SSMC_ERR_ARGUMENT,
                 {"weight D [4]: non-finite value nan at element 1"});
  expect_refused(ssmc_set_layer_weight(t, 1, "D", nullptr, 4), SSMC_ERR_ARGUMENT, {"weight D [4]: null pointer"});
  expect_refused(ssmc_set_layer_weight(t, 2, "ple_w", four.data(), 4), SSMC_ERR_ARGUMENT,
                 {"'ple_w' is not a weight of the gdn layer", "(its weights: conv_w, A_log, dt_bias, norm_w)"});

  // a layer added by name without all its weights: the first begin_op names the missing one
  int layer = -1;
  ASSERT_EQ(ssmc_add_layer_by_name(t, "gdn", int(n.size()), n.data(), v.data(), &layer), SSMC_OK) << ssmc_last_error();
  ASSERT_EQ(layer, 3);
  const LayerSpec s3 = layer_from_attrs(
      "gdn", {{"nk", "1"}, {"nv", "2"}, {"kd", "4"}, {"vd", "4"}, {"d_conv", "4"}, {"conv_bias", "0"}, {"eps", "1e-6"}},
      "");
  for (const WeightField& f : s3.weights()) {
    if (std::string(f.name) == "norm_w") continue;
    size_t count = 1;
    for (int64_t e : f.shape) count *= size_t(e);
    const std::vector<float> x(count, 0.25f);
    ASSERT_EQ(ssmc_set_layer_weight(t, 3, f.name, x.data(), int64_t(x.size())), SSMC_OK) << ssmc_last_error();
  }
  expect_refused(ssmc_begin_op(t, "alloc"), SSMC_ERR_ORDER,
                 {"ssmc_begin_op: layer 3 (gdn(nk=1,nv=2,kd=4,vd=4,d_conv=4)) weight norm_w [4] not set",
                  "ssmc_set_layer_weight"});
  ASSERT_EQ(ssmc_set_layer_weight(t, 3, "norm_w", four.data(), 4), SSMC_OK) << ssmc_last_error();
  // a weight of a layer added the old way may be given again (replaced), before the first op
  std::vector<float> a_log = r.header.model.weights[0].A_log;
  a_log[0] += 0.125f;
  ASSERT_EQ(ssmc_set_layer_weight(t, 0, "A_log", a_log.data(), int64_t(a_log.size())), SSMC_OK) << ssmc_last_error();
  // numerics given as attributes and by ssmc_set_layer_convention are one setting: the later wins
  ASSERT_EQ(ssmc_set_layer_convention(t, 0, "gates", "clamped"), SSMC_OK) << ssmc_last_error();
  ASSERT_EQ(ssmc_begin_op(t, "alloc"), SSMC_OK) << ssmc_last_error();
  ASSERT_EQ(ssmc_end_op(t), SSMC_OK) << ssmc_last_error();
  expect_refused(ssmc_set_layer_weight(t, 0, "A_log", a_log.data(), int64_t(a_log.size())), SSMC_ERR_ORDER,
                 {"after the first ssmc_begin_op"});
  expect_refused(add("gdn", n, v), SSMC_ERR_ORDER, {"after the first op"});
  ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
  const formats::Trace got = formats::read_trace(d.file("m.h5"));
  ASSERT_EQ(got.header.model.spec.layers.size(), 4u);
  EXPECT_EQ(got.header.model.weights[0].A_log, a_log);
  EXPECT_EQ(got.header.model.weights[3].norm_w, four);
  EXPECT_EQ(got.header.model.spec.layers[0].numerics.gates, GateMath::clamped);
  EXPECT_EQ(got.header.model.spec.layers[1].norm_groups, 1);
}

TEST(CaptureByName, MisspeltInputsAndOutputsAreRefusedByNameAndTheTraceKeepsOnlyTheGoodOps) {
  TempDir d;
  const Recorded& r = recorded();
  const ModelSpec& spec = r.header.model.spec;
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "asynchronous" : "synchronous");
    const std::string path = d.file(async ? "a.h5" : "s.h5");
    ssmc_trace* t = open_by_name(r.header, path);
    ASSERT_NE(t, nullptr);
    if (async) {
      ASSERT_EQ(ssmc_set_async(t, 0, SSMC_BLOCK), SSMC_OK);
    }
    ASSERT_EQ(capture(t, spec, r.ops[0], true, false), SSMC_OK) << ssmc_last_error();  // alloc
    const formats::TraceOp& pre = r.ops[1];                                            // prefill 3
    ASSERT_EQ(pre.op.kind, OpKind::prefill);
    const LayerRows& rows0 = pre.inputs[0].layers[0];
    const LayerRows& rows1 = pre.inputs[0].layers[1];
    auto begin = [&] { ASSERT_EQ(ssmc_begin_op(t, "prefill 3"), SSMC_OK) << ssmc_last_error(); };
    begin();
    expect_refused(ssmc_op_input(t, 0, 1, "xbc", SSMC_F32, rows1.conv_in.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                   {"ssmc_op_input: entry 0 layer 1: 'xbc' is not an input of the mamba2 layer",
                    "(its inputs: xBC, dt, z)", "did you mean xBC?"});
    EXPECT_EQ(ssmc_end_op(t), SSMC_ERR_ORDER) << "the refused call dropped the op";
    begin();
    expect_refused(ssmc_op_input(t, 0, 1, "ple_x", SSMC_F32, rows1.conv_in.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                   {"'ple_x' is not an input of the mamba2 layer"});
    begin();
    expect_refused(ssmc_op_input(t, 0, 1, "xBC", SSMC_I32, rows1.conv_in.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                   {"xBC: dtype 2 (inputs are SSMC_F32)"});
    begin();
    expect_refused(ssmc_op_input(t, 0, 0, "x", SSMC_F32, nullptr, SSMC_HOST), SSMC_ERR_ARGUMENT, {"x", "null pointer"});
    begin();
    expect_refused(
        ssmc_op_output(t, 0, 2, "ple_out", rows0.conv_in.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
        {"ssmc_op_output: entry 0 layer 2: 'ple_out' is not an output of the gdn layer", "(its outputs: out)"});
    begin();
    expect_refused(ssmc_op_output(t, 0, 0, "outs", rows0.conv_in.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                   {"'outs' is not an output", "(its outputs: out, ple_out)", "did you mean out?"});
    begin();
    expect_refused(ssmc_op_input(t, 1, 0, "x", SSMC_F32, rows0.conv_in.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                   {"entry 1 outside the selector's 0..0"});
    if (!async) {  // what needs the data: refused at the call here, by the writer when asynchronous
      begin();
      std::vector<int32_t> ids = ids_of(rows0.ple_tokens);
      ids[1] = -3;
      expect_refused(ssmc_op_input(t, 0, 0, "ple_tokens", SSMC_I32, ids.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                     {"ple_tokens [rows][1]: row 1 holds -3, not a token id"});
      begin();
      std::vector<float> fids = rows0.ple_tokens;
      fids[2] = 2.5f;
      expect_refused(ssmc_op_input(t, 0, 0, "ple_tokens", SSMC_F32, fids.data(), SSMC_HOST), SSMC_ERR_ARGUMENT,
                     {"row 2 holds 2.5, not a token id"});
      begin();
      ASSERT_EQ(ssmc_op_input(t, 0, 0, "x", SSMC_F32, rows0.conv_in.data(), SSMC_HOST), SSMC_OK);
      expect_refused(ssmc_op_input(t, 0, 0, "x", SSMC_F32, rows0.conv_in.data(), SSMC_HOST), SSMC_ERR_ORDER,
                     {"entry 0 layer 0 x [rows][", "given twice"});
      begin();  // an input given by name, then by ssmc_op_inputs: given twice
      ASSERT_EQ(ssmc_op_input(t, 0, 1, "dt", SSMC_F32, rows1.dt_in.data(), SSMC_HOST), SSMC_OK);
      expect_refused(
          ssmc_op_inputs(t, 0, 1, rows1.conv_in.data(), rows1.dt_in.data(), nullptr, rows1.gate_in.data(), SSMC_HOST),
          SSMC_ERR_ORDER, {"given twice"});
    }
    // an input left out: refused by end_op (asynchronous: by the writer, reported at flush)
    begin();
    for (size_t l = 0; l < spec.layers.size(); ++l)
      for (const InputField& f : spec.layers[l].inputs()) {
        if (l == 1 && std::string(f.name) == "dt") continue;
        ASSERT_EQ(ssmc_op_input(t, 0, int(l), f.name, SSMC_F32, (pre.inputs[0].layers[l].*f.member).data(), SSMC_HOST),
                  SSMC_OK)
            << ssmc_last_error();
      }
    if (async) {
      ASSERT_EQ(ssmc_end_op(t), SSMC_OK) << ssmc_last_error();
      expect_refused(ssmc_flush(t), SSMC_ERR_INVALID, {"layer1", "dt"});
    } else {
      expect_refused(ssmc_end_op(t), SSMC_ERR_INVALID, {"layer1", "dt"});
    }
    // the good op goes through
    ASSERT_EQ(capture(t, spec, pre, true, async), SSMC_OK) << ssmc_last_error();
    if (async) {  // an asynchronous close says the writer failed an op (the trace holds the others)
      expect_refused(ssmc_close(t), SSMC_ERR_INVALID, {"1 op(s) failed in the background writer", "holds the other 2"});
    } else {
      ASSERT_EQ(ssmc_close(t), SSMC_OK) << ssmc_last_error();
    }
    const formats::Trace got = formats::read_trace(path);
    ASSERT_EQ(got.ops.size(), 2u) << "the refused ops left nothing";
    Recorded two = r;
    two.ops.resize(2);
    expect_recording(two, got);
  }
}

}  // namespace
}  // namespace ssm::test
