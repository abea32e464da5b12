// State-trace format (formats/trace.h): bit-exact round trips of every field (FP16 and FP32
// states, partial layers, the staging blob, outputs, refusals), byte-identical files, crash
// safety (a killed writer's PATH.partial/ keeps every flushed op), and a catalogue of bad
// traces, each a FormatError naming file and object and exit code 2 from `ssmcheck replay`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>

#include "formats/hdf5_file.h"
#include "replay/replay.h"
#include "tests/support/trace_support.h"
#include "tests/support/file_bytes.h"

namespace ssm::test {
namespace {

namespace fs = std::filesystem;

void expect_tensor(const std::optional<Tensor>& a, const std::optional<Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (a) {
    EXPECT_TRUE(a->bit_equal(*b)) << what;
  }
}

void expect_same(const Recorded& w, const formats::Trace& r) {
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.header.producer, w.header.producer);
  EXPECT_EQ(r.header.backend, w.header.backend);
  EXPECT_EQ(r.header.seed, w.header.seed);
  EXPECT_EQ(r.header.case_name, w.header.case_name);
  EXPECT_EQ(r.header.pool.name(), w.header.pool.name());
  ASSERT_EQ(r.header.model.spec.layers.size(), w.header.model.spec.layers.size());
  for (size_t l = 0; l < w.header.model.spec.layers.size(); ++l) {
    EXPECT_EQ(r.header.model.spec.layers[l].name(), w.header.model.spec.layers[l].name());
    EXPECT_EQ(r.header.model.weights[l].conv_w, w.header.model.weights[l].conv_w);
    EXPECT_EQ(r.header.model.weights[l].conv_bias, w.header.model.weights[l].conv_bias);
    EXPECT_EQ(r.header.model.weights[l].A_log, w.header.model.weights[l].A_log);
    EXPECT_EQ(r.header.model.weights[l].dt_bias, w.header.model.weights[l].dt_bias);
    EXPECT_EQ(r.header.model.weights[l].norm_w, w.header.model.weights[l].norm_w);
  }
  ASSERT_EQ(r.ops.size(), w.ops.size());
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const formats::TraceOp& a = w.ops[i];
    const formats::TraceOp& b = r.ops[i];
    const std::string at = "op " + std::to_string(i) + " " + to_string(a.op);
    EXPECT_TRUE(a.op == b.op) << at;
    EXPECT_EQ(a.refused, b.refused) << at;
    ASSERT_EQ(a.inputs.size(), b.inputs.size()) << at;
    for (size_t e = 0; e < a.inputs.size(); ++e) {
      EXPECT_EQ(a.inputs[e].rows, b.inputs[e].rows) << at;
      ASSERT_EQ(a.inputs[e].layers.size(), b.inputs[e].layers.size()) << at;
      for (size_t l = 0; l < a.inputs[e].layers.size(); ++l) {
        EXPECT_EQ(a.inputs[e].layers[l].conv_in, b.inputs[e].layers[l].conv_in) << at;
        EXPECT_EQ(a.inputs[e].layers[l].gate_in, b.inputs[e].layers[l].gate_in) << at;
      }
    }
    ASSERT_EQ(a.outputs.size(), b.outputs.size()) << at;
    for (size_t e = 0; e < a.outputs.size(); ++e) {
      ASSERT_EQ(a.outputs[e].has_value(), b.outputs[e].has_value()) << at;
      if (!a.outputs[e]) continue;
      for (size_t l = 0; l < a.outputs[e]->layers.size(); ++l)
        EXPECT_EQ(0, std::memcmp(a.outputs[e]->layers[l].data(), b.outputs[e]->layers[l].data(),
                                 a.outputs[e]->layers[l].size() * 4))
            << at;
    }
    ASSERT_EQ(a.states.size(), b.states.size()) << at;
    for (size_t s = 0; s < a.states.size(); ++s) {
      const formats::TraceState& x = a.states[s];
      const formats::TraceState& y = b.states[s];
      EXPECT_EQ(x.seq, y.seq);
      EXPECT_EQ(x.layers, y.layers);
      EXPECT_EQ(x.state.slot, y.state.slot);
      EXPECT_EQ(x.state.last_verify_k, y.state.last_verify_k);
      expect_tensor(x.state.h_prefill_stage, y.state.h_prefill_stage, at + " stage");
      ASSERT_EQ(x.state.layers.size(), y.state.layers.size());
      for (size_t l = 0; l < x.state.layers.size(); ++l) {
        const LayerState& p = x.state.layers[l];
        const LayerState& q2 = y.state.layers[l];
        EXPECT_EQ(p.h_is_f16, q2.h_is_f16);
        EXPECT_TRUE(p.h.bit_equal(q2.h)) << at;
        EXPECT_TRUE(p.conv.bit_equal(q2.conv)) << at;
        expect_tensor(p.h_checkpoint, q2.h_checkpoint, at + " h_checkpoint");
        expect_tensor(p.conv_checkpoint, q2.conv_checkpoint, at + " conv_checkpoint");
        ASSERT_EQ(p.h_intermediates.size(), q2.h_intermediates.size());
        for (size_t t = 0; t < p.h_intermediates.size(); ++t) {
          EXPECT_TRUE(p.h_intermediates[t].bit_equal(q2.h_intermediates[t])) << at;
          EXPECT_TRUE(p.conv_intermediates[t].bit_equal(q2.conv_intermediates[t])) << at;
        }
      }
    }
  }
}

const char* kEveryOp =
    "alloc; prefill 5; to_f16; checkpoint; verify 4; commit 2 4; decode; verify 3 wy; rollback 1; "
    "snapshot_save 0; commit 0 3; snapshot_restore 0; rollback_and_checkpoint_async 0; release";

TEST(TraceFormat, RoundTripIsBitExactInEveryMode) {
  TempDir dir;
  for (HMode mode : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    SCOPED_TRACE(to_string(mode));
    const Recorded w = record(case_of("odd-a", mode, 5), kEveryOp);
    const std::string path = dir.file(std::string("rt-") + to_string(mode) + ".h5");
    formats::write_trace(path, w.header, w.ops);
    EXPECT_FALSE(fs::exists(formats::trace_partial_dir(path)));
    expect_same(w, formats::read_trace(path));
  }
}

TEST(TraceFormat, PartialLayersBatchesPaddingAndTheStage) {
  TempDir dir;
  CaseConfig c = case_of("odd-d", HMode::f16_pool, 9);
  const Recorded w = record(c,
                            "alloc @0; alloc @1; prefill 3 @0; prefill 2 @1; decode @1,pad,0; "
                            "verify 3 wy @pad,0,1; commit 2 3 @0; release @1",
                            {0, 2});
  ASSERT_TRUE(w.ops.back().states.at(0).state.h_prefill_stage.has_value());
  const std::string path = dir.file("partial-layers.h5");
  formats::write_trace(path, w.header, w.ops);
  const formats::Trace t = formats::read_trace(path);
  expect_same(w, t);
  EXPECT_FALSE(t.ops[4].outputs[1].has_value());  // the padding entry's outputs are not kept
  ref::ReferenceBackend b;
  EXPECT_TRUE(replay::replay_trace(t, b).pass());
}

// The second file is written in a later second of the clock than the first, so that a time stamp
// anywhere in the file (HDF5 puts one in every object header that tracks times, the superblock
// extension's included, which a non-default file-space strategy adds) makes the bytes differ every
// time, not only when the two writes straddle a second by chance.
TEST(TraceFormat, IdenticalContentGivesIdenticalBytes) {
  TempDir dir;
  const Recorded w = record(case_of("tiny", HMode::f16, 3), kEveryOp);
  formats::write_trace(dir.file("a.h5"), w.header, w.ops);
  const std::time_t a_written = std::time(nullptr);
  while (std::time(nullptr) <= a_written) ::usleep(50 * 1000);
  formats::write_trace(dir.file("b.h5"), w.header, w.ops);
  const std::string sa = test::file_bytes(dir.file("a.h5")), sb = test::file_bytes(dir.file("b.h5"));
  EXPECT_FALSE(sa.empty());
  EXPECT_TRUE(sa == sb);
}

// A writer process that dies (no close, no destructors) after `ops` ops, with a half-written
// next op on disk under its temporary name.
void crash_after(const std::string& path, const Recorded& w, int ops) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    formats::TraceWriter tw(path, w.header);
    for (int i = 0; i < ops; ++i) tw.append(w.ops[size_t(i)]);
    std::ofstream half(formats::trace_partial_dir(path) + "/op-" + std::string(6 - std::to_string(ops).size(), '0') +
                       std::to_string(ops) + ".h5.tmp-1");
    half << "\x89HDF\r\n half an op";
    half.close();
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
}

// A partial capture whose last op file is empty or truncated (the capture died while writing it)
// still gives the ops before it; a missing middle op file ends the trace there, said loudly.
TEST(TraceFormat, APartialCaptureWithADamagedLastOrMissingMiddleOpFile) {
  TempDir dir;
  const Recorded w = record(case_of("tiny", HMode::f32, 4), kEveryOp);
  const std::string path = dir.file("p.h5");
  crash_after(path, w, 6);
  const std::string pd = formats::trace_partial_dir(path);
  const std::string last = pd + "/op-000005.h5";
  const auto size = fs::file_size(last);
  for (const uintmax_t keep : {uintmax_t(0), uintmax_t(size / 2)}) {
    SCOPED_TRACE("last op file cut to " + std::to_string(keep) + " of " + std::to_string(size) + " bytes");
    const std::string copy = dir.file("cut" + std::to_string(keep) + ".h5");
    fs::copy(pd, formats::trace_partial_dir(copy));
    fs::resize_file(formats::trace_partial_dir(copy) + "/op-000005.h5", keep);
    const formats::Trace t = formats::read_trace(copy);
    EXPECT_EQ(t.ops.size(), 5u);
    EXPECT_NE(t.note.find("5 ops recovered"), std::string::npos) << t.note;
    EXPECT_NE(t.note.find("the last op file, op-000005.h5, is incomplete"), std::string::npos) << t.note;
  }
  fs::remove(pd + "/op-000002.h5");
  const formats::Trace t = formats::read_trace(path);
  EXPECT_EQ(t.ops.size(), 2u);
  EXPECT_NE(t.note.find("WARNING: op-000002.h5 is missing while 3 later op file(s) exist"), std::string::npos)
      << t.note;
}

TEST(TraceFormat, ACrashedCaptureKeepsEveryFlushedOp) {
  TempDir dir;
  const Recorded w = record(case_of("tiny", HMode::f32, 4), kEveryOp);
  const std::string path = dir.file("crashed.h5");
  crash_after(path, w, 6);
  ASSERT_FALSE(fs::exists(path));
  ASSERT_TRUE(fs::is_directory(formats::trace_partial_dir(path)));
  const formats::Trace t = formats::read_trace(path);  // finds PATH.partial
  EXPECT_FALSE(t.finished);
  ASSERT_EQ(t.ops.size(), 6u);
  EXPECT_EQ(t.note, "capture did not finish: 6 ops recovered, the trace ends after op 5 'commit 2 4'");
  Recorded first6 = w;
  first6.ops.resize(6);
  for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(t.ops[i].op == w.ops[i].op);
  ref::ReferenceBackend b;
  const replay::ReplayResult r = replay::replay_trace(t, b);
  EXPECT_TRUE(r.pass()) << r.text();
  EXPECT_NE(r.text().find("capture did not finish"), std::string::npos);
  // the CLI replays it too, naming where it ends
  const Shell s = sh(std::string(SSMCHECK_BIN) + " replay " + q(path));
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("6 ops recovered, the trace ends after op 5 'commit 2 4'"), std::string::npos) << s.out;
  // a crash before the first op: header only
  const std::string p0 = dir.file("crashed0.h5");
  crash_after(p0, w, 0);
  EXPECT_EQ(formats::read_trace(p0).ops.size(), 0u);
  // a writer destroyed without close() leaves the same recoverable directory
  const std::string p1 = dir.file("abandoned.h5");
  {
    formats::TraceWriter tw(p1, w.header);
    tw.append(w.ops[0]);
    tw.append(w.ops[1]);
  }
  EXPECT_EQ(formats::read_trace(p1).ops.size(), 2u);
  // a new capture of the same path moves the unfinished one aside (never deletes its ops)
  {
    formats::TraceWriter again(p1, w.header);
    EXPECT_EQ(again.moved_aside(), formats::trace_partial_dir(p1) + ".1");
    again.append(w.ops[0]);
    again.close();
  }
  EXPECT_EQ(formats::read_trace(p1).ops.size(), 1u);
  EXPECT_EQ(formats::read_trace(formats::trace_partial_dir(p1) + ".1").ops.size(), 2u) << "the old capture is kept";
  {
    formats::TraceWriter one(p1 + "x", w.header);  // nothing to move aside
    EXPECT_EQ(one.moved_aside(), "");
  }
}

// ---------------------------------------------------------------------------------------------
// Bad traces: each must be a FormatError naming file and object, and exit 2 from replay.

class BadTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const Recorded w = record(case_of("tiny", HMode::f16, 8),
                              "alloc; prefill 3; to_f16; checkpoint; verify 3; commit 2 3; decode @0,pad");
    formats::write_trace(dir_->file("good.h5"), w.header, w.ops);
  }
  static void TearDownTestSuite() { delete dir_; }

  // Copies the good trace, applies `edit` to the open file, and returns the copy's path.
  std::string mutate(const std::string& name, const std::function<void(hid_t)>& edit) {
    const std::string p = dir_->file(name);
    fs::copy_file(dir_->file("good.h5"), p, fs::copy_options::overwrite_existing);
    h5::silence_errors();
    h5::Handle f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "open");
    edit(f);
    f.close("close");
    return p;
  }
  std::string file_with(const std::string& name, const std::string& bytes) {
    const std::string p = dir_->file(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  void expect_bad(const std::string& path, const std::string& object, const std::string& words) {
    try {
      formats::read_trace(path);
      ADD_FAILURE() << path << ": read without error";
    } catch (const formats::FormatError& e) {
      EXPECT_EQ(e.object(), object) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    const Shell s = sh(std::string(SSMCHECK_BIN) + " replay " + q(path));
    EXPECT_EQ(s.code, 2) << s.out;
    EXPECT_NE(s.out.find("bad trace"), std::string::npos) << s.out;
  }
  static void replace_attr_str(hid_t loc, const char* name, const std::string& v) {
    H5Adelete(loc, name);
    h5::write_attr_str(loc, name, v);
  }
  static void replace_attr_i64(hid_t loc, const char* name, int64_t v) {
    H5Adelete(loc, name);
    h5::write_attr_i64(loc, name, v);
  }
  static void replace_dataset(hid_t loc, const char* name, DType dt, const std::vector<int64_t>& dims, float fill) {
    H5Ldelete(loc, name, H5P_DEFAULT);
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> f(size_t(n), fill);
    std::vector<uint16_t> h(size_t(n), 0x3c00);
    h5::write_dataset(loc, name, dt, dims, dt == DType::f32 ? static_cast<const void*>(f.data()) : h.data());
  }
  static TempDir* dir_;
};
TempDir* BadTrace::dir_ = nullptr;

TEST_F(BadTrace, TruncatedEmptyAndForeignFiles) {
  const std::string all = test::file_bytes(dir_->file("good.h5"));
  expect_bad(file_with("truncated.h5", all.substr(0, all.size() / 2)), "/", "");
  expect_bad(file_with("head.h5", all.substr(0, 600)), "/", "");
  expect_bad(file_with("empty.h5", ""), "/", "empty file");
  expect_bad(file_with("text.h5", "alloc; prefill 3\n"), "/", "not an HDF5 file");
  expect_bad(dir_->file("missing.h5"), "/", "no such file");
}

TEST_F(BadTrace, VersionFormatAndHeader) {
  // every version ever written is read (kTraceVersions, formats/file_version.h); a newer one is
  // refused saying so, one never written as not this format
  expect_bad(mutate("version.h5", [](hid_t f) { replace_attr_i64(f, "version", 2); }), "/@version",
             "version 2 was written by a newer ssmcheck: this one reads versions 1..1 (upgrade ssmcheck to read it)");
  expect_bad(mutate("version0.h5", [](hid_t f) { replace_attr_i64(f, "version", 0); }), "/@version",
             "version 0 was never written by ssmcheck");
  expect_bad(mutate("format.h5", [](hid_t f) { replace_attr_str(f, "format", "ssmcheck-dump"); }), "/@format",
             "expected 'ssmcheck-trace'");
  expect_bad(mutate("mode.h5", [](hid_t f) { replace_attr_str(f, "h_mode", "bf16"); }), "/@h_mode", "bf16");
  expect_bad(mutate("nomodel.h5", [](hid_t f) { H5Ldelete(f, "model", H5P_DEFAULT); }), "/model", "missing group");
  expect_bad(mutate("opcount.h5", [](hid_t f) { replace_attr_i64(f, "ops", 9); }), "/ops", "members");
  // /ops is counted, not listed: a member that is not an op is found by the op it stands for
  expect_bad(mutate("extra-op.h5", [](hid_t f) { h5::create_group(f, "ops/stray"); }), "/ops", "members");
  expect_bad(
      mutate("renamed-op.h5", [](hid_t f) { H5Lmove(f, "ops/000002", f, "ops/stray", H5P_DEFAULT, H5P_DEFAULT); }),
      "/ops/000002", "missing");
  expect_bad(mutate("nv.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "model/layer0");
                      replace_attr_i64(g, "nk", 3);
                    }),
             "/model/layer0", "multiple of nk");
  expect_bad(mutate("weights.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "model/layer1");
                      replace_dataset(g, "A_log", DType::f32, {5}, 0.0f);
                    }),
             "/model/layer1/A_log", "shape [5]");
  expect_bad(mutate("caps.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "pool");
                      H5Adelete(g, "h_capacity");
                      h5::write_attr_i64s(g, "h_capacity", {4, 4});
                    }),
             "/pool@h_capacity", "2 entries for 4 slots");
}

TEST_F(BadTrace, OpsShapesDtypesAndNaN) {
  expect_bad(mutate("unknown-op.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001");
                      replace_attr_str(g, "op", "frobnicate 3");
                    }),
             "/ops/000001@op", "unknown op 'frobnicate'");
  expect_bad(mutate("refused-kind.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001");
                      h5::write_attr_str(g, "refused", "out_of_cheese");
                    }),
             "/ops/000001@refused", "unknown error kind");
  expect_bad(mutate("shape.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001/inputs/entry0/layer0");
                      replace_dataset(g, "x", DType::f32, {3, 39}, 0.5f);
                    }),
             "/ops/000001/inputs/entry0/layer0/x", "shape [3, 39], expected [3, 40]");
  expect_bad(mutate("rows.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001");
                      replace_attr_str(g, "op", "prefill 4");
                    }),
             "/ops/000001/inputs/entry0/layer0/x", "expected [4, 40]");
  expect_bad(mutate("dtype.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001/inputs/entry0/layer1");
                      replace_dataset(g, "a", DType::f16, {3, 2}, 0.0f);
                    }),
             "/ops/000001/inputs/entry0/layer1/a", "expected IEEE float32");
  expect_bad(mutate("nan.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001/inputs/entry0/layer1");
                      replace_dataset(g, "z", DType::f32, {3, 24}, std::nanf(""));
                    }),
             "/ops/000001/inputs/entry0/layer1/z", "non-finite");
  expect_bad(mutate("no-inputs.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001");
                      H5Ldelete(g, "inputs", H5P_DEFAULT);
                    }),
             "/ops/000001/inputs/entry0", "missing");
  expect_bad(mutate("state-dtype.h5",
                    [](hid_t f) {
                      // h after to_f16 is FP16; an FP32 h with h_is_f16 set is the fluent-garbage bug
                      h5::Handle g = h5::open_group(f, "ops/000002/state/seq0/layer1");
                      replace_dataset(g, "h", DType::f32, {2, 8, 12}, 0.0f);
                      h5::Handle d = h5::open_dataset(g, "h");
                      h5::write_attr_str(d, "dtype", "f32");
                      h5::write_attr_str(d, "layout", "[nv][kd][vd], vd fastest");
                    }),
             "/ops/000002/state/seq0/layer1/h@dtype", "expected f16");
  expect_bad(mutate("state-count.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000004/state/seq0/layer0");
                      replace_attr_i64(g, "intermediates", 1);
                    }),
             "/ops/000004/state/seq0/layer0@intermediates", "last_verify_k 3");
  expect_bad(mutate("state-layer.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000004/state/seq0");
                      H5Lmove(g, "layer1", g, "layer7", H5P_DEFAULT, H5P_DEFAULT);
                    }),
             "/ops/000004/state/seq0/layer7", "beyond the model");
  expect_bad(mutate("stray.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000003");
                      h5::create_group(g, "extras");
                    }),
             "/ops/000003/extras", "unexpected member");
  // an object of the wrong kind where one is read (h5::open_if: opened, the kind asked only then)
  expect_bad(mutate("group-for-dataset.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001/state/seq0/layer0");
                      H5Ldelete(g, "conv", H5P_DEFAULT);
                      h5::create_group(g, "conv");
                    }),
             "/ops/000001/state/seq0/layer0/conv", "is not a dataset");
  expect_bad(mutate("dataset-for-group.h5",
                    [](hid_t f) {
                      h5::Handle g = h5::open_group(f, "ops/000001/state/seq0");
                      H5Ldelete(g, "layer0", H5P_DEFAULT);
                      h5::write_dataset(g, "layer0", DType::f32, {2}, std::vector<float>(2).data());
                    }),
             "/ops/000001/state/seq0/layer0", "is not a group");
}

TEST_F(BadTrace, NonFiniteRecordedValuesAreEvidenceNotBadInput) {
  const std::string p = mutate("nan-state.h5", [](hid_t f) {
    h5::Handle g = h5::open_group(f, "ops/000001/state/seq0/layer0");
    replace_dataset(g, "conv", DType::f32, {40, 4}, std::nanf(""));
    h5::Handle d = h5::open_dataset(g, "conv");
    h5::write_attr_str(d, "dtype", "f32");
    h5::write_attr_str(d, "layout", "[conv_dim][d_conv], column 0 oldest");
  });
  const Shell s = sh(std::string(SSMCHECK_BIN) + " replay " + q(p));
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("FIRST DIVERGENCE at op 1 'prefill 3', seq 0, layer 0, conv"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("non-finite"), std::string::npos) << s.out;
}

// Op sequences that break the contract: a trace that records no refusal where the backend must
// refuse is a reported divergence (exit 1), never a crash.
TEST(TraceFormat, ContractBreakingSequencesAreDivergences) {
  TempDir dir;
  const CaseConfig c = case_of("tiny", HMode::f32, 2);
  const std::vector<std::string> scripts = {
      "decode",                                  // no alloc: bad_slot
      "alloc; prefill 2; commit 0 4",            // commit_zero
      "alloc; prefill 2; verify 3; commit 4 3",  // commit_n_gt_k
      "alloc; verify 9",                         // capacity
      "alloc; prefill 2; rollback 2",            // rollback_range
      "alloc; to_f16",                           // wrong_mode
      "alloc; alloc; prefill 1",                 // alloc of a live sequence
      "alloc; snapshot_restore 1",               // snapshot_empty
      "alloc; decode @0,0",                      // slot twice in a batch
  };
  for (const std::string& script : scripts) {
    SCOPED_TRACE(script);
    Recorded w = record(c, script);
    int refused_at = -1;
    for (size_t i = 0; i < w.ops.size(); ++i)
      if (w.ops[i].refused && refused_at < 0) refused_at = int(i);
    ASSERT_GE(refused_at, 0);
    // an engine that did not refuse: the refusal is dropped, inputs are present
    w.ops[size_t(refused_at)].refused.reset();
    const formats::TraceOp& t = w.ops[size_t(refused_at)];
    if (t.op.takes_inputs()) {
      for (size_t e = 0; e < t.op.seqs.size(); ++e)
        if (w.ops[size_t(refused_at)].inputs[e].layers.empty())
          w.ops[size_t(refused_at)].inputs[e] =
              make_inputs(w.header.model.spec, c.gen, refused_at, 0, int(e), t.op.rows());
    }
    const std::string p = dir.file("contract.h5");
    formats::write_trace(p, w.header, w.ops);
    const Shell s = sh(std::string(SSMCHECK_BIN) + " replay " + q(p));
    EXPECT_EQ(s.code, 1) << s.out;
    EXPECT_NE(s.out.find("FIRST DIVERGENCE at op " + std::to_string(refused_at)), std::string::npos) << s.out;
    EXPECT_NE(s.out.find("the trace recorded no refusal"), std::string::npos) << s.out;
  }
}

TEST(TraceFormat, WriterRejectsInvalidOps) {
  TempDir dir;
  const Recorded w = record(case_of("tiny", HMode::f32, 2), "alloc; prefill 2");
  formats::TraceWriter tw(dir.file("w.h5"), w.header);
  formats::TraceOp bad = w.ops[1];
  bad.inputs[0].layers[1].dt_in.pop_back();
  EXPECT_THROW(tw.append(bad), formats::FormatError);
  bad = w.ops[1];
  bad.inputs[0].layers[0].conv_in[0] = std::nanf("");
  EXPECT_THROW(tw.append(bad), formats::FormatError);
  bad = w.ops[1];
  bad.states[0].layers = {1, 0};
  EXPECT_THROW(tw.append(bad), formats::FormatError);
  EXPECT_EQ(tw.ops(), 0);
  tw.append(w.ops[0]);
  tw.close();
  EXPECT_EQ(formats::read_trace(dir.file("w.h5")).ops.size(), 1u);
}

}  // namespace
}  // namespace ssm::test
