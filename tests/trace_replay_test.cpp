// Replay (replay/replay.h) and the trace command line: every golden trace under
// fixtures/traces replays on the reference; every faulty one is pinpointed at its documented
// op, layer and tensor; a trace written by python/examples/write_trace.py (ssmcheck.TraceWriter) replays;
// record -> replay round trips, --keep-going, the gate with its JUnit XML and JSON, and outputs
// that never clobber (formats/output_file.h: device nodes, symlinks, planted temporaries).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "formats/dump.h"
#include "formats/hdf5_file.h"
#include "formats/output_file.h"
#include "replay/replay.h"
#include "tests/support/summary_text.h"
#include "tests/support/trace_support.h"
#include "tests/support/file_bytes.h"

namespace ssm::test {
namespace {

namespace fs = std::filesystem;

std::string traces_dir() { return std::string(SSMCHECK_FIXTURES_DIR) + "/traces"; }

std::vector<std::string> traces(const std::string& dir) {
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".h5") v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

class GoldenTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTrace, ReplaysOnTheReference) {
  const std::string path = traces_dir() + "/" + GetParam();
  const formats::Trace t = formats::read_trace(path);
  EXPECT_TRUE(t.finished);
  EXPECT_FALSE(t.header.expect.has_value());
  // every bundled trace is a file of a version this build still reads (formats/file_version.h)
  EXPECT_GE(t.header.version, formats::kTraceVersions.oldest);
  EXPECT_LE(t.header.version, formats::kTraceVersions.newest);
  ref::ReferenceBackend b;
  const replay::ReplayResult r = replay::replay_trace(t, b);
  EXPECT_TRUE(r.pass()) << path << "\n" << r.text();
  EXPECT_GT(r.states_compared, 0);
  EXPECT_EQ(r.ops_run, int(t.ops.size()));
  for (const auto& ref : r.refusals) EXPECT_TRUE(ref.agree()) << ref.text("reference");
}
INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTrace, ::testing::ValuesIn(traces(traces_dir())), [](const auto& info) {
  std::string s = info.param.substr(0, info.param.size() - 3);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
});

TEST(GoldenTraces, CoverEveryOpModeArmAndBatching) {
  std::set<std::string> ops, modes;
  bool wy = false, exact = false, padded = false, batched = false, refusal = false, qwen = false;
  for (const std::string& name : traces(traces_dir())) {
    const formats::Trace t = formats::read_trace(traces_dir() + "/" + name);
    modes.insert(to_string(t.header.pool.h_mode));
    qwen = qwen || t.header.model.spec.name == "qwen3-next-80b";
    for (const formats::TraceOp& o : t.ops) {
      refusal = refusal || o.refused.has_value();
      if (o.refused) continue;
      ops.insert(op_name(o.op.kind));
      if (o.op.kind == OpKind::verify) (o.op.arm == VerifyArm::wy ? wy : exact) = true;
      batched = batched || o.op.seqs.size() > 1;
      padded = padded || std::count(o.op.seqs.begin(), o.op.seqs.end(), kPadRow) > 0;
    }
  }
  for (OpKind k : all_op_kinds()) EXPECT_TRUE(ops.count(op_name(k))) << "no golden trace applies " << op_name(k);
  EXPECT_EQ(modes, (std::set<std::string>{"f32", "f16", "f16-pool"}));
  EXPECT_TRUE(wy && exact && batched && padded && refusal && qwen);
  std::uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(traces_dir())) bytes += e.is_regular_file() ? e.file_size() : 0;
  // The clone's budget for traces: 22 MiB since the PLE traces (Dec 2026: 14 golden and 11 faulty
  // traces, 22.1 MB; they record the hosting layers' states after the ops that move the carry only)
  EXPECT_LT(bytes, 22u << 20) << "fixtures/traces must stay under 22 MiB";
}

class FaultyTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(FaultyTrace, IsPinpointedAtItsOpLayerAndTensor) {
  const std::string path = traces_dir() + "/faulty/" + GetParam();
  const formats::Trace t = formats::read_trace(path);
  ASSERT_TRUE(t.header.expect.has_value()) << path;
  ref::ReferenceBackend b;
  const replay::ReplayResult r = replay::replay_trace(t, b);
  ASSERT_FALSE(r.pass()) << path;
  EXPECT_TRUE(r.matches(*t.header.expect))
      << path << ": expected " << t.header.expect->text() << ", got " << r.divergences.front().headline();
  EXPECT_EQ(r.divergences.size(), 1u);  // stops at the first divergence
  EXPECT_EQ(r.last_agreed_op, t.header.expect->op - 1) << r.text();
  const Shell s = sh(std::string(SSMCHECK_BIN) + " replay " + q(path));
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("FIRST DIVERGENCE at op " + std::to_string(t.header.expect->op)), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("pinpointed"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("last op where everything agreed"), std::string::npos) << s.out;
}
INSTANTIATE_TEST_SUITE_P(Fixtures, FaultyTrace, ::testing::ValuesIn(traces(traces_dir() + "/faulty")),
                         [](const auto& info) { return info.param.substr(0, info.param.size() - 3); });

TEST(Replay, KeepGoingReportsLaterDivergences) {
  TempDir dir;
  Recorded w = record(case_of("tiny", HMode::f32, 21), "alloc; prefill 3; decode; decode; decode");
  for (int i : {2, 4}) w.ops[size_t(i)].states[0].state.layers[0].h.f32()[3] += 1.0f;
  formats::write_trace(dir.file("k.h5"), w.header, w.ops);
  const formats::Trace t = formats::read_trace(dir.file("k.h5"));
  ref::ReferenceBackend b;
  replay::ReplayOptions o;
  o.keep_going = true;
  const replay::ReplayResult r = replay::replay_trace(t, b, o);
  ASSERT_EQ(r.divergences.size(), 2u) << r.text();
  EXPECT_EQ(r.divergences[0].op_index, 2);
  EXPECT_EQ(r.divergences[1].op_index, 4);
  EXPECT_EQ(r.last_agreed_op, 1);
  EXPECT_EQ(r.ops_run, 5);
  const Shell s = sh(std::string(SSMCHECK_BIN) + " replay --keep-going --json " + q(dir.file("k.json")) + " " +
                     q(dir.file("k.h5")));
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("further divergence at op 4"), std::string::npos) << s.out;
  std::ifstream js(dir.file("k.json"));
  const nlohmann::json j = nlohmann::json::parse(js);
  EXPECT_EQ(j.at("schema"), "ssmcheck-verdict");
  EXPECT_EQ(j.at("tool"), "ssmcheck replay");
  EXPECT_EQ(j.at("results").at(0).at("divergences").size(), 2u);
  // a loose tolerance makes the same trace agree: the tolerance flags reach the comparison
  const Shell loose = sh(std::string(SSMCHECK_BIN) + " replay --tolerance fp32-state.atol=2,fp32-state.max_nrmse=1 " +
                         q(dir.file("k.h5")));
  EXPECT_EQ(loose.code, 0) << loose.out;
}

// Bits where bits are promised: a trace whose states this backend and build recorded must come
// back bit for bit, so a 1-ULP difference fails; from another build it is judged by the classes.
TEST(Replay, SameBackendAndBuildReplayIsBitwise) {
  Recorded w = record(case_of("odd-a", HMode::f32, 23), "alloc; prefill 3; decode; verify 3; commit 2 3");
  uint32_t bits;
  float& v = w.ops[2].states[0].state.layers[0].h.f32()[5];
  std::memcpy(&bits, &v, 4);
  bits += 1;  // one ULP
  std::memcpy(&v, &bits, 4);
  formats::Trace t;
  t.header = w.header;
  t.ops = w.ops;
  ref::ReferenceBackend b;
  t.header.build = formats::build_id(b);
  const replay::ReplayResult same = replay::replay_trace(t, b);
  EXPECT_TRUE(same.bitwise) << same.judged;
  ASSERT_FALSE(same.pass()) << "a 1-ULP difference passed a same-build replay";
  EXPECT_EQ(same.divergences[0].op_index, 2);
  t.header.build = "ssmcheck 0.0.0 exe:0000000000000000";
  const replay::ReplayResult other = replay::replay_trace(t, b);
  EXPECT_FALSE(other.bitwise);
  EXPECT_TRUE(other.pass()) << other.text();
  EXPECT_NE(other.judged.find("re-record"), std::string::npos) << other.judged;
  t.header.build = formats::build_id(b);
  replay::ReplayOptions o;
  o.same_build_bitwise = false;
  EXPECT_TRUE(replay::replay_trace(t, b, o).pass());
}

// Several traces in one call; a bad one is reported and the others still replayed (exit 2);
// op scripts from a file with --ops @FILE.
TEST(Replay, SeveralTracesAndOpsFromAFile) {
  TempDir dir;
  { std::ofstream(dir.file("bad.h5")) << "not HDF5"; }
  const std::string bin = SSMCHECK_BIN;
  const Shell two = sh(bin + " replay " + q(traces_dir() + "/tiny_f32_every_op.h5") + " " +
                       q(traces_dir() + "/odd_d_f32_batched.h5") + " --json " + q(dir.file("two.json")));
  EXPECT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("2 traces: all agree"), std::string::npos) << two.out;
  const Shell three = sh(bin + " replay " + q(traces_dir() + "/tiny_f32_every_op.h5") + " " + q(dir.file("bad.h5")) +
                         " " + q(traces_dir() + "/odd_d_f32_batched.h5") + " --json " + q(dir.file("three.json")));
  EXPECT_EQ(three.code, 2) << three.out;
  std::ifstream js(dir.file("three.json"));
  const nlohmann::json j = nlohmann::json::parse(js);
  ASSERT_EQ(j.at("results").size(), 3u) << j.dump();
  EXPECT_TRUE(j.at("results").at(1).contains("bad_input"));
  EXPECT_FALSE(j.at("pass"));
  EXPECT_NE(three.out.find("odd_d_f32_batched"), std::string::npos) << "the trace after the bad one was not replayed";
  { std::ofstream(dir.file("s.ops")) << "alloc\n# a comment\nprefill 3\ndecode\n"; }
  const Shell run = sh(bin + " run --ops @" + q(dir.file("s.ops")));
  EXPECT_EQ(run.code, 0) << run.out;
  EXPECT_NE(run.out.find("3 ops, 0 refused"), std::string::npos) << run.out;
  EXPECT_EQ(sh(bin + " run --ops @" + q(dir.file("missing.ops"))).code, 2);
  // JUnit from replay (one case per trace and backend) and from fuzz (the campaign), as the gate
  const Shell ju = sh(bin + " replay " + q(traces_dir() + "/tiny_f32_every_op.h5") + " " + q(dir.file("bad.h5")) +
                      " --junit " + q(dir.file("r.xml")));
  EXPECT_EQ(ju.code, 2) << ju.out;
  const std::string rxml = test::file_bytes(dir.file("r.xml"));
  EXPECT_NE(rxml.find("<testsuites name=\"ssmcheck replay\" tests=\"2\" failures=\"1\""), std::string::npos) << rxml;
  EXPECT_NE(rxml.find("classname=\"replay.reference\""), std::string::npos) << rxml;
  const Shell fz = sh(bin + " fuzz --cases 3 --max-ops 5 --junit " + q(dir.file("f.xml")));
  EXPECT_EQ(fz.code, 0) << fz.out;
  // and from check (the script): agree, diverge-free refusal-only (nothing checked: a failure)
  const Shell ck = sh(bin + " check --ops 'alloc; prefill 3; decode' --junit " + q(dir.file("c.xml")));
  EXPECT_EQ(ck.code, 0) << ck.out;
  const std::string cxml = test::file_bytes(dir.file("c.xml"));
  EXPECT_NE(cxml.find("<testsuites name=\"ssmcheck check\" tests=\"1\" failures=\"0\""), std::string::npos) << cxml;
  EXPECT_NE(cxml.find("3 ops agree"), std::string::npos) << cxml;
  EXPECT_EQ(sh(bin + " check --ops 'release' --junit " + q(dir.file("c2.xml"))).code, 5);
  const std::string cxml2 = test::file_bytes(dir.file("c2.xml"));
  EXPECT_NE(cxml2.find("failures=\"1\""), std::string::npos) << cxml2;
  EXPECT_NE(cxml2.find("nothing was checked"), std::string::npos) << cxml2;
  // progress lines (plain when not a terminal) carry done/total and an ETA
  const Shell prog = sh(bin + " fuzz --cases 20 --max-ops 3");
  EXPECT_NE(prog.out.find("ssmcheck fuzz: 10/20 cases"), std::string::npos) << prog.out;
  EXPECT_NE(prog.out.find(", ETA "), std::string::npos) << prog.out;
  const std::string fxml = test::file_bytes(dir.file("f.xml"));
  EXPECT_NE(fxml.find("<testsuites name=\"ssmcheck fuzz\" tests=\"1\" failures=\"0\""), std::string::npos) << fxml;
  EXPECT_NE(fxml.find("3 cases"), std::string::npos) << fxml;
}

TEST(Replay, RecordThenReplayFromTheCommandLine) {
  TempDir dir;
  const std::string p = dir.file("rec.h5");
  const std::string bin = SSMCHECK_BIN;
  const Shell rec = sh(bin +
                       " record --preset odd-c --h-mode f16-pool --seed 5 --outputs --states 2,4 --ops "
                       "'alloc; prefill 4; decode; verify 3 wy; commit 2 3; commit 0 3' -o " +
                       q(p));
  ASSERT_EQ(rec.code, 0) << rec.out;
  EXPECT_NE(rec.out.find("6 ops, 1 refused, 2 states"), std::string::npos) << rec.out;
  const Shell rep = sh(bin + " replay --backend all " + q(p));
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("result: AGREE"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("the trace recorded the same refusal"), std::string::npos) << rep.out;
#ifndef SSMCHECK_TEST_HAVE_CUDA
  EXPECT_NE(rep.out.find("backend cuda: skipped"), std::string::npos) << rep.out;
#endif
  // recorded by this very backend and build: judged bit for bit without asking
  EXPECT_NE(rep.out.find("judged bit for bit: recorded by this backend and numerics (reference numerics:"),
            std::string::npos)
      << rep.out;
  const Shell bitwise = sh(bin + " replay --bitwise " + q(p));
  EXPECT_EQ(bitwise.code, 0) << bitwise.out;  // same backend, same inputs: same bits
  const Shell classes = sh(bin + " replay --classes " + q(p));
  EXPECT_NE(classes.out.find("judged under the tolerance classes"), std::string::npos) << classes.out;
  EXPECT_EQ(sh(bin + " record --ops 'alloc; frob' -o " + q(dir.file("x.h5"))).code, 2);
  EXPECT_EQ(sh(bin + " replay --backend nope " + q(p)).code, 2);
}

// --config (fixtures/hf_config.h) wherever --preset is: record keeps where the model came from
// in /model@source, the trace replays, fuzz runs on it, and a Mamba-2 config is a clear error.
TEST(Replay, HfConfigModelRecordsReplaysAndFuzzes) {
  TempDir dir;
  const std::string p = dir.file("cfg.h5");
  const std::string bin = SSMCHECK_BIN;
  const std::string cfg = std::string(SSMCHECK_SOURCE_DIR) + "/fixtures/configs/qwen3-next-80b-a3b-instruct.json";
  const Shell rec =
      sh(bin + " record --config " + q(cfg) + " --layers 1 --outputs --ops 'alloc; prefill 2; decode' -o " + q(p));
  ASSERT_EQ(rec.code, 0) << rec.out;
  EXPECT_NE(rec.out.find("--config " + cfg), std::string::npos) << rec.out;
  const formats::Trace t = formats::read_trace(p);
  EXPECT_EQ(t.header.model.spec.source, "config.json " + cfg);
  EXPECT_EQ(t.header.model.spec.name, "qwen3_next");
  ASSERT_EQ(t.header.model.spec.layers.size(), 1u);
  EXPECT_EQ(t.header.model.spec.layers[0].nv, 32);
  const Shell rep = sh(bin + " replay " + q(p));
  EXPECT_EQ(rep.code, 0) << rep.out;
  const Shell fz = sh(bin + " fuzz --config " + q(cfg) + " --layers 1 --cases 2 --max-ops 4 --out " + q(dir.file("f")));
  EXPECT_EQ(fz.code, 0) << fz.out;
  EXPECT_NE(fz.out.find("2 cases (case 0..1 of seed 1)"), std::string::npos) << fz.out;
  // the Mamba-2 config runs (two of its 24 layers, to keep it quick)
  const Shell mamba = sh(bin + " run --layers 2 --config " +
                         q(std::string(SSMCHECK_SOURCE_DIR) + "/fixtures/configs/nemotron-h-8b-base-8k.json"));
  EXPECT_EQ(mamba.code, 0) << mamba.out;
  EXPECT_NE(mamba.out.find("mamba2(nh=128,hp=64,ns=128,ng=8,d_conv=4)"), std::string::npos) << mamba.out;
  EXPECT_EQ(sh(bin + " run --config " + q(cfg) + " --preset tiny").code, 2)
      << "--config and --preset exclude each other";
}

// An op asking for more inputs than ssmcheck builds is an error naming the size, before anything
// is allocated (run under a 3 GB address-space limit: a bad_alloc would not get this message),
// and a huge pool is refused by its bounds.
TEST(Replay, HugeOpsAndPoolsAreErrorsBeforeAllocation) {
  const std::string bin = SSMCHECK_BIN;
  for (const std::string ops : {"alloc; prefill 300000000", "alloc; verify 100000000"}) {
    const Shell s = sh("ulimit -v 3000000; " + bin + " run --ops '" + ops + "'");
    EXPECT_EQ(s.code, 2) << ops << "\n" << s.out;
    EXPECT_NE(s.out.find("more than ssmcheck builds for one sequence of one op (1 GiB)"), std::string::npos) << s.out;
  }
  const Shell slots = sh("ulimit -v 3000000; " + bin + " run --slots 100000000 --ops alloc");
  EXPECT_EQ(slots.code, 2) << slots.out;
  EXPECT_NE(slots.out.find("--slots 100000000: pool slots must be in 1..65536"), std::string::npos) << slots.out;
}

// An op script beyond the 64 KiB of an HDF5 object header (10,002 ops, about 75 KiB) is kept in
// dense attribute storage: record and dump write it, replay reads it back.
TEST(Replay, ScriptsBeyond64KiBAreRecordedAndReplayed) {
  TempDir dir;
  std::string ops = "alloc; prefill 1";
  for (int i = 0; i < 10000; ++i) ops += "; decode";
  std::ofstream(dir.file("long.ops")) << ops;
  ASSERT_GT(ops.size(), 65536u);
  const std::string bin = SSMCHECK_BIN;
  const Shell r = sh(bin + " record --preset tiny --layers 1 --states last --ops @" + q(dir.file("long.ops")) + " -o " +
                     q(dir.file("long.h5")));
  ASSERT_EQ(r.code, 0) << r.out;
  const Shell p = sh(bin + " replay " + q(dir.file("long.h5")));
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("AGREE: 10002 ops"), std::string::npos) << p.out;
  const Shell d =
      sh(bin + " dump --preset tiny --layers 1 --ops @" + q(dir.file("long.ops")) + " -o " + q(dir.file("d.h5")));
  EXPECT_EQ(d.code, 0) << d.out;
  EXPECT_EQ(sh(bin + " diff " + q(dir.file("d.h5")) + " " + q(dir.file("d.h5"))).code, 0);
}

// `--json -` everywhere: the verdict alone on stdout (everything else on stderr), one schema.
TEST(Verdicts, JsonOnStdoutIsTheVerdictAloneWithItsSchema) {
  TempDir dir;
  const std::string bin = SSMCHECK_BIN;
  ASSERT_EQ(sh(bin + " dump --ops 'alloc; decode' -o " + q(dir.file("a.h5"))).code, 0);
  const std::vector<std::tuple<std::string, std::string, std::string>> cmds = {
      {bin + " gate --cases 3 --no-coverage --backend reference --json -", "ssmcheck-verdict", "ssmcheck gate"},
      {bin + " replay " + q(traces_dir() + "/tiny_f32_every_op.h5") + " --json -", "ssmcheck-verdict",
       "ssmcheck replay"},
      {bin + " check --ops 'alloc; decode' --json -", "ssmcheck-verdict", "ssmcheck check"},
      {bin + " fuzz --cases 3 --out " + q(dir.file("f")) + " --json -", "ssmcheck-verdict", "ssmcheck fuzz"},
      {bin + " diff " + q(dir.file("a.h5")) + " " + q(dir.file("a.h5")) + " --json -", "ssmcheck-diff",
       "ssmcheck diff"},
  };
  for (const auto& [cmd, schema, tool] : cmds) {
    const Shell s = sh("( " + cmd + " 2>/dev/null )");
    EXPECT_EQ(s.code, 0) << cmd << "\n" << s.out;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(s.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << cmd << ": stdout is not one JSON document (" << e.what() << "):\n" << s.out;
      continue;
    }
    EXPECT_EQ(j.at("schema"), schema) << cmd;
    EXPECT_EQ(j.at("schema_version"), 1) << cmd;
    EXPECT_EQ(j.at("tool"), tool) << cmd;
  }
  EXPECT_FALSE(fs::exists("-")) << "a file named '-' was written";
}

TEST(Replay, PythonExampleTraceReplays) {
  if (sh("/usr/bin/python3 -c 'import h5py, numpy'").code != 0)
    GTEST_SKIP() << "python3-h5py / python3-numpy not installed (/usr/bin/python3 -c 'import h5py, numpy' failed)";
  TempDir dir;
  const std::string p = dir.file("example.h5");
  // ssmcheck.TraceWriter (python/ssmcheck/capture.py) finds libssmcheck_capture.so next to $SSMCHECK
  const Shell w = sh("SSMCHECK=" + q(SSMCHECK_BIN) + " /usr/bin/python3 " + std::string(SSMCHECK_SOURCE_DIR) +
                     "/python/examples/write_trace.py " + q(p));
  ASSERT_EQ(w.code, 0) << w.out;
  const formats::Trace t = formats::read_trace(p);
  EXPECT_EQ(t.header.producer, "write_trace.py (numpy GDN)");
  ref::ReferenceBackend b;
  const replay::ReplayResult r = replay::replay_trace(t, b);
  EXPECT_TRUE(r.pass()) << r.text();
  EXPECT_EQ(r.outputs_compared, 6);
  const Shell s = sh(std::string(SSMCHECK_BIN) + " replay " + q(p));
  EXPECT_EQ(s.code, 0) << s.out;
}

TEST(Gate, RunsOnTheBundledFixturesAndWritesJUnitAndJson) {
  TempDir dir;
  // 30 cases are too few to reach every threshold, clamp and axis: the coverage check is off here
  const Shell s = sh(std::string(SSMCHECK_BIN) + " gate --cases 30 --no-coverage --junit " + q(dir.file("g.xml")) +
                     " --json " + q(dir.file("g.json")));
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("replay.golden.reference"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("replay.faulty.reference"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("campaign.reference"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("result: PASS"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("wrote JUnit XML to " + dir.file("g.xml")), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("wrote JSON to " + dir.file("g.json")), std::string::npos) << s.out;
#ifndef SSMCHECK_TEST_HAVE_CUDA
  EXPECT_NE(s.out.find("cuda: skipped"), std::string::npos) << s.out;
#endif
  const std::string xml = test::file_bytes(dir.file("g.xml"));
  EXPECT_NE(xml.find("<testsuites name=\"ssmcheck gate\""), std::string::npos);
  EXPECT_NE(xml.find("classname=\"replay.faulty.reference\""), std::string::npos);
  std::ifstream js(dir.file("g.json"));
  const nlohmann::json j = nlohmann::json::parse(js);
  EXPECT_TRUE(j.at("pass").get<bool>());
  EXPECT_GE(j.at("cases").size(), traces(traces_dir()).size() + traces(traces_dir() + "/faulty").size());
}

// --shard I/N: shard 0 replays the traces and runs its campaign cases, the others only their
// cases; together they are the unsharded gate (fuzz's partition is tested in property_test).
TEST(Gate, ShardsSplitTheCampaignAndShardZeroReplays) {
  TempDir dir;
  const std::string gate = std::string(SSMCHECK_BIN) + " gate --cases 10 --no-coverage --backend reference";
  const Shell s0 = sh(gate + " --shard 0/2 --json " + q(dir.file("0.json")));
  const Shell s1 = sh(gate + " --shard 1/2 --json " + q(dir.file("1.json")));
  ASSERT_EQ(s0.code, 0) << s0.out;
  ASSERT_EQ(s1.code, 0) << s1.out;
  std::ifstream f0(dir.file("0.json")), f1(dir.file("1.json"));
  const nlohmann::json j0 = nlohmann::json::parse(f0), j1 = nlohmann::json::parse(f1);
  size_t replays0 = 0, replays1 = 0;
  for (const auto& c : j0.at("cases")) replays0 += c.at("suite").get<std::string>().rfind("replay.", 0) == 0;
  for (const auto& c : j1.at("cases")) replays1 += c.at("suite").get<std::string>().rfind("replay.", 0) == 0;
  EXPECT_EQ(replays0, traces(traces_dir()).size() + traces(traces_dir() + "/faulty").size());
  EXPECT_EQ(replays1, 0u);
  EXPECT_NE(s0.out.find("case 0, 2, .. 8 of seed 1, shard 0/2"), std::string::npos) << s0.out;
  EXPECT_NE(s1.out.find("case 1, 3, .. 9 of seed 1, shard 1/2"), std::string::npos) << s1.out;
  EXPECT_EQ(sh(gate + " --shard 2/2").code, 2);
}

// --device D: a device beyond those visible, or not a number, is bad input naming the flag before
// any work starts; a valid one leaves a reference-only gate unchanged (it never touches CUDA).
TEST(Gate, DeviceFlagIsCheckedAndNarrowsTheVisibleGpus) {
  const std::string gate = std::string(SSMCHECK_BIN) + " gate --cases 4 --no-coverage --backend reference";
  const Shell beyond = sh("CUDA_VISIBLE_DEVICES=2,3 " + gate + " --device 2");
  EXPECT_EQ(beyond.code, 2) << beyond.out;
  EXPECT_NE(beyond.out.find("--device 2: CUDA_VISIBLE_DEVICES='2,3' leaves 2 GPUs (0..1)"), std::string::npos)
      << beyond.out;
  const Shell word = sh(std::string(SSMCHECK_BIN) + " fuzz --device one --cases 1");
  EXPECT_EQ(word.code, 2) << word.out;
  EXPECT_NE(word.out.find("--device 'one': expected a GPU index"), std::string::npos) << word.out;
  const Shell ok = sh("CUDA_VISIBLE_DEVICES=2,3 " + gate + " --device 1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  // `--backend all` skips an unavailable CUDA backend, unless --device asked for a GPU
  const Shell all = sh(std::string(SSMCHECK_BIN) + " gate --cases 2 --no-coverage --backend all --device 0 " +
                       "--traces " + q(traces_dir()));
  if (all.out.find("cuda: skipped") != std::string::npos || all.code != 0) {  // no usable GPU here
    EXPECT_EQ(all.code, 5) << all.out;                                        // nothing was checked, not bad input
    EXPECT_NE(all.out.find("nothing was checked: --device 0: backend 'cuda': "), std::string::npos) << all.out;
  }
  // nothing that builds a command line may start the CUDA runtime (it reads CUDA_VISIBLE_DEVICES
  // once): found on the H200, where --backend's help text had probed the device and --device 1
  // still ran on GPU 0
  for (const std::string& cmd : std::vector<std::string>{
           " check --backend cuda --preset tiny --ops 'alloc; decode'", " fuzz --backend cuda --cases 1",
           " gate --backend cuda --cases 1", " replay --backend cuda " + q(traces_dir() + "/tiny_f32_every_op.h5")}) {
    const Shell s = sh(std::string(SSMCHECK_BIN) + cmd + " --device 0");
    EXPECT_EQ(s.out.find("started before"), std::string::npos) << cmd << "\n" << s.out;
  }
}

// A built-in backend this machine cannot run, asked for by name, is "nothing was checked" (5), as
// `mutants` answers for the mutants of a backend it skips; not bad input (2). An empty
// CUDA_VISIBLE_DEVICES hides every GPU, so this holds on a GPU machine too.
TEST(Gate, AnUnavailableBackendAskedForByNameChecksNothing) {
  for (const std::string& cmd : std::vector<std::string>{
           " check --backend cuda --preset tiny --ops 'alloc; decode'", " fuzz --backend cuda --cases 1",
           " gate --backend cuda --cases 1", " replay --backend cuda " + q(traces_dir() + "/tiny_f32_every_op.h5")}) {
    const Shell s = sh("CUDA_VISIBLE_DEVICES= " + std::string(SSMCHECK_BIN) + cmd);
    EXPECT_EQ(s.code, 5) << cmd << "\n" << s.out;
    EXPECT_NE(s.out.find("ssmcheck: nothing was checked: backend 'cuda': "), std::string::npos) << cmd << "\n" << s.out;
  }
  const Shell typo = sh(std::string(SSMCHECK_BIN) + " gate --backend cdua --cases 1");  // still bad input
  EXPECT_EQ(typo.code, 2) << typo.out;
  EXPECT_NE(typo.out.find("unknown backend 'cdua'"), std::string::npos) << typo.out;
}

TEST(Gate, ACampaignThatNeverReachedAnAxisFailsItsCoverageCheck) {
  const Shell s = sh(std::string(SSMCHECK_BIN) + " gate --cases 5 --backend reference");
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("coverage check failed, never reached: "), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("batch of >= 200 rows"), std::string::npos) << s.out;
}

// A crash in the middle of a check still leaves a failing verdict that names the check: the
// gate is killed with SIGSEGV during its campaign.
TEST(Gate, ACrashLeavesAVerdictNamingTheCheck) {
  TempDir dir;
  const std::string json = dir.file("crash.json"), xml = dir.file("crash.xml");
  const Shell s = sh(std::string(SSMCHECK_BIN) + " gate -v --backend reference --cases 100000 --no-coverage --json " +
                     q(json) + " --junit " + q(xml) + " > " + q(dir.file("log")) + " 2>&1 & pid=$!; " +
                     "for i in $(seq 1 300); do sleep 0.1; grep -q 'campaign.reference: ' " + q(dir.file("log")) +
                     " 2>/dev/null && break; done; kill -SEGV $pid; wait $pid; echo rc=$?");
  EXPECT_NE(s.out.find("rc=139"), std::string::npos) << s.out;  // still dies of the signal
  std::ifstream js(json);
  const nlohmann::json j = nlohmann::json::parse(js);
  EXPECT_FALSE(j.at("pass").get<bool>());
  const nlohmann::json& last = j.at("cases").back();
  EXPECT_EQ(last.at("suite"), "campaign.reference");
  EXPECT_EQ(last.at("status"), "fail");
  EXPECT_NE(last.at("message").get<std::string>().find("crashed"), std::string::npos);
  EXPECT_GE(j.at("cases").size(), 8u);  // the replays that finished before are kept
  const std::string junit = test::file_bytes(xml);
  EXPECT_NE(junit.find("crashed"), std::string::npos);
}

// replay and fuzz leave a failing verdict naming the running step when they die on a signal, and
// keep what finished before it (the same mechanism as the gate's, cli/crash_verdict.h).
// Shell: SIGSEGV to $pid once `log` holds `text` (a replay finished, a campaign's first progress
// line: the crash verdict is armed by then), whatever the machine's speed; after 120 s regardless.
std::string kill_once(const std::string& log, const std::string& text) {
  return "for i in $(seq 1200); do grep -qF -- " + q(text) + " " + q(log) +
         " && break; sleep 0.1; done; kill -SEGV $pid;";
}

TEST(Replay, ACrashLeavesAVerdictNamingTheTraceAndBackend) {
  TempDir dir;
  const std::string json = dir.file("r.json"), xml = dir.file("r.xml"), log = dir.file("log");
  std::string many;  // the golden traces 40 times over: long enough to be killed in the middle
  for (int i = 0; i < 40; ++i)
    for (const std::string& t : traces(traces_dir())) many += " " + q(traces_dir() + "/" + t);
  const Shell s = sh(std::string(SSMCHECK_BIN) + " replay" + many + " --json " + q(json) + " --junit " + q(xml) +
                     " > " + q(log) + " 2>&1 & pid=$!; " + kill_once(log, "-- on ") + " wait $pid; echo rc=$?");
  EXPECT_NE(s.out.find("rc=139"), std::string::npos) << s.out;
  std::ifstream js(json);
  const nlohmann::json all = nlohmann::json::parse(js);
  EXPECT_FALSE(all.at("pass")) << all.dump();
  const nlohmann::json& j = all.at("results");
  ASSERT_GE(j.size(), 2u) << j.dump();  // at least one finished replay, then the crashed step
  EXPECT_NE(j.back().at("crashed").get<std::string>().find("fatal signal"), std::string::npos) << j.dump();
  EXPECT_NE(j.back().at("trace").get<std::string>().find(".h5"), std::string::npos) << j.dump();
  const std::string junit = test::file_bytes(xml);
  EXPECT_NE(junit.find("crashed"), std::string::npos) << junit;

  const std::string fx = dir.file("f.xml");
  const Shell f =
      sh(std::string(SSMCHECK_BIN) + " fuzz --cases 100000 --out " + q(dir.file("out")) + " --junit " + q(fx) + " > " +
         q(log) + " 2>&1 & pid=$!; " + kill_once(log, " cases, ") + " wait $pid; echo rc=$?");
  EXPECT_NE(f.out.find("rc=139"), std::string::npos) << f.out;
  const std::string fj = test::file_bytes(fx);
  EXPECT_NE(fj.find("crashed: the process died on a fatal signal during the campaign"), std::string::npos) << fj;
  EXPECT_NE(fj.find("failures=\"1\""), std::string::npos) << fj;
}

TEST(Gate, OutputPathsAreCheckedBeforeAnyWork) {
  TempDir dir;
  { std::ofstream(dir.file("plain")) << "a file, not a directory"; }
  const std::string bad = dir.file("plain") + "/x.xml";
  const Shell s = sh(std::string(SSMCHECK_BIN) + " gate --cases 1 --junit " + q(bad));
  EXPECT_EQ(s.code, 2) << s.out;
  EXPECT_NE(s.out.find("--junit " + bad + ": "), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("replay.golden"), std::string::npos) << "the gate ran before checking its output: " << s.out;
  const Shell r = sh(std::string(SSMCHECK_BIN) + " replay --json " + q(dir.file("plain") + "/r.json") + " " +
                     q(traces_dir() + "/tiny_f32_every_op.h5"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(r.out.find("-- on reference"), std::string::npos) << "replay ran before checking --json: " << r.out;
  // a missing parent directory is created, and said so, everywhere
  const Shell g = sh(std::string(SSMCHECK_BIN) + " gate --cases 1 --no-coverage --backend reference --json " +
                     q(dir.file("new/sub/g.json")));
  EXPECT_NE(g.out.find("created directory"), std::string::npos) << g.out;
  EXPECT_TRUE(fs::exists(dir.file("new/sub/g.json")));
}

// Outputs never clobber (formats/output_file.h, README "Command line"). Device nodes are private
// ones made with mknod in the test's own directory: as root, a test writing to the system's
// /dev/null or /dev/full through a write-then-rename would replace the machine's device node.
namespace outputs {

// A character device node `name` (major, minor) in dir; skips (with the reason) where mknod is
// not allowed. CI and the development machines run these tests as root.
bool make_char_device(const TempDir& dir, const std::string& name, unsigned major, unsigned minor, std::string* skip) {
  if (::geteuid() != 0) {
    *skip = "mknod of a private device node needs root (CI and the development machines run as root)";
    return false;
  }
  if (::mknod(dir.file(name).c_str(), S_IFCHR | 0666, ::makedev(major, minor)) != 0) {
    *skip = "mknod " + dir.file(name) + " failed: " + std::strerror(errno) + " (no CAP_MKNOD here?)";
    return false;
  }
  return true;
}

bool is_char_device(const std::string& path, unsigned major, unsigned minor) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) && ::major(st.st_rdev) == major &&
         ::minor(st.st_rdev) == minor;
}

// Names in dir that look like a temporary of the outputs rule (PATH.tmp-...), except `keep`.
std::vector<std::string> temporaries(const TempDir& dir, const std::string& keep = "") {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp-") != std::string::npos && n != keep) v.push_back(n);
  }
  return v;
}

const std::string kGood = "/tiny_f32_every_op.h5";             // replays: exit 0
const std::string kFaulty = "/faulty/flip_h_after_commit.h5";  // diverges: exit 1

}  // namespace outputs

// A private null device (c 1 3) at PATH stays a device after --json/--junit/--html/-o PATH, and
// the exit code is the verdict's; a private full device (c 1 7) is exit 2 naming the flag and
// stays a device too.
TEST(Outputs, DeviceNodesAreWrittenThroughNeverReplaced) {
  using namespace outputs;
  TempDir dir;
  std::string skip;
  if (!make_char_device(dir, "null", 1, 3, &skip) || !make_char_device(dir, "full", 1, 7, &skip)) GTEST_SKIP() << skip;
  const std::string null = dir.file("null"), full = dir.file("full"), bin = SSMCHECK_BIN;
  const Shell good = sh(bin + " replay " + q(traces_dir() + kGood) + " --json " + q(null) + " --junit " + q(null) +
                        " --html " + q(null));
  EXPECT_EQ(good.code, 0) << good.out;
  EXPECT_TRUE(is_char_device(null, 1, 3)) << "--json/--junit/--html replaced the device node";
  const Shell bad = sh(bin + " replay " + q(traces_dir() + kFaulty) + " --json " + q(null));
  EXPECT_EQ(bad.code, 1) << "the verdict, not the output, decides the exit code: " << bad.out;
  EXPECT_TRUE(is_char_device(null, 1, 3));
  const Shell dump = sh(bin + " dump --ops alloc -o " + q(null));
  EXPECT_EQ(dump.code, 0) << dump.out;
  EXPECT_TRUE(is_char_device(null, 1, 3)) << "dump -o replaced the device node";

  const Shell f = sh(bin + " replay " + q(traces_dir() + kGood) + " --json " + q(full));
  EXPECT_EQ(f.code, 2) << f.out;
  EXPECT_NE(f.out.find("--json " + full + ": cannot write: No space left on device"), std::string::npos) << f.out;
  EXPECT_TRUE(is_char_device(full, 1, 7));
  const Shell fd = sh(bin + " dump --ops alloc -o " + q(full));
  EXPECT_EQ(fd.code, 2) << fd.out;
  EXPECT_NE(fd.out.find("-o " + full + ": "), std::string::npos) << fd.out;
  EXPECT_NE(fd.out.find("No space left on device"), std::string::npos) << fd.out;
  EXPECT_TRUE(is_char_device(full, 1, 7));
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

// A symlink at PATH stays a symlink: its target gets the content (a regular file replaced, a
// device written through, a dangling link's target created).
TEST(Outputs, SymlinksAreKeptAndTheirTargetWritten) {
  using namespace outputs;
  TempDir dir;
  const std::string bin = SSMCHECK_BIN;
  { std::ofstream(dir.file("target.json")) << "old content"; }
  fs::create_symlink("target.json", dir.file("link.json"));
  fs::create_symlink("link.json", dir.file("chain.json"));
  fs::create_symlink("created.h5", dir.file("dangling.h5"));
  const Shell s = sh(bin + " replay " + q(traces_dir() + kGood) + " --json " + q(dir.file("chain.json")));
  EXPECT_EQ(s.code, 0) << s.out;
  ASSERT_TRUE(fs::is_symlink(dir.file("chain.json")));
  ASSERT_TRUE(fs::is_symlink(dir.file("link.json")));
  EXPECT_EQ(fs::read_symlink(dir.file("link.json")), "target.json");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir.file("target.json"))));
  const nlohmann::json j = nlohmann::json::parse(test::file_bytes(dir.file("target.json")));
  EXPECT_TRUE(j.at("pass").get<bool>()) << j.dump();
  const Shell d = sh(bin + " dump --ops alloc -o " + q(dir.file("dangling.h5")));
  EXPECT_EQ(d.code, 0) << d.out;
  EXPECT_TRUE(fs::is_symlink(dir.file("dangling.h5")));
  EXPECT_EQ(formats::read_dump(dir.file("created.h5")).provenance.backend, "reference");
  std::string skip;
  if (make_char_device(dir, "null", 1, 3, &skip)) {
    fs::create_symlink("null", dir.file("to-null.json"));
    EXPECT_EQ(sh(bin + " replay " + q(traces_dir() + kGood) + " --json " + q(dir.file("to-null.json"))).code, 0);
    EXPECT_TRUE(fs::is_symlink(dir.file("to-null.json")));
    EXPECT_TRUE(is_char_device(dir.file("null"), 1, 3));
  }
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
}

// A regular file is replaced (a new file renamed over it: a hard link to the old one keeps the old
// content); no temporary is left behind.
TEST(Outputs, ARegularFileIsReplacedAndNoTemporaryIsLeft) {
  using namespace outputs;
  TempDir dir;
  const std::string out = dir.file("v.json"), bin = SSMCHECK_BIN;
  { std::ofstream(out) << "old content"; }
  fs::create_hard_link(out, dir.file("old.json"));
  const Shell s = sh(bin + " replay " + q(traces_dir() + kFaulty) + " --json " + q(out));
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_FALSE(nlohmann::json::parse(test::file_bytes(out)).at("pass").get<bool>());
  EXPECT_EQ(test::file_bytes(dir.file("old.json")), "old content") << "the file was rewritten in place, not replaced";
  EXPECT_EQ(temporaries(dir), std::vector<std::string>{});
  // a directory at PATH is bad input naming the flag
  fs::create_directory(dir.file("d.json"));
  const Shell d = sh(bin + " replay " + q(traces_dir() + kGood) + " --json " + q(dir.file("d.json")));
  EXPECT_EQ(d.code, 2) << d.out;
  EXPECT_NE(d.out.find("--json " + dir.file("d.json") + ": is a directory"), std::string::npos) << d.out;
}

// A symlink planted at a would-be temporary name is never followed: at the name the old writer
// used (PATH.tmp-PID: the shell plants it, then execs ssmcheck with that PID), and at the exact
// name the rule is about to create (a prepared output, as the crash handler uses; HDF5's exclusive
// create).
TEST(Outputs, APlantedTemporarySymlinkIsNeverFollowed) {
  using namespace outputs;
  TempDir dir;
  const std::string victim = dir.file("victim"), bin = SSMCHECK_BIN;
  { std::ofstream(victim) << "precious"; }
  for (const std::string& flags :
       {std::string("replay ") + q(traces_dir() + kGood) + " --json " + q(dir.file("o.json")),
        std::string("dump --ops alloc -o ") + q(dir.file("o.h5"))}) {
    const std::string out = dir.file(flags.rfind("dump", 0) == 0 ? "o.h5" : "o.json");
    const Shell s = sh("sh -c " + q("ln -s " + victim + " " + out + ".tmp-$$ && exec " + bin + " " + flags));
    EXPECT_EQ(s.code, 0) << flags << ": " << s.out;
    EXPECT_EQ(test::file_bytes(victim), "precious") << flags << " followed the planted symlink";
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out))) << flags;
  }
  // the temporary name the rule picked is taken by a planted symlink: the exclusive create fails,
  // nothing is written through it, the target is unchanged
  files::PreparedOutput p = files::prepare_output(dir.file("crash.json"));
  ASSERT_EQ(p.target.placement, files::Placement::replace);
  fs::create_symlink(victim, p.temp);
  const std::string text = "verdict";
  EXPECT_EQ(files::write_prepared(p, text.data(), text.size()), EEXIST);
  EXPECT_EQ(test::file_bytes(victim), "precious");
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir.file("crash.json"))));
  EXPECT_THROW(h5::create_file(p.temp, /*exclusive=*/true), h5::Error);
  EXPECT_EQ(test::file_bytes(victim), "precious");
  // and with a free name the same prepared output is written and renamed into place
  p.temp = files::temporary_name(p.target.path);
  EXPECT_EQ(files::write_prepared(p, text.data(), text.size()), 0);
  EXPECT_EQ(test::file_bytes(dir.file("crash.json")), text);
}

TEST(Gate, FailsWhenAFaultyTraceIsNotPinpointed) {
  TempDir dir;
  fs::create_directories(dir.file("t/faulty"));
  fs::copy_file(traces_dir() + "/tiny_f32_every_op.h5", dir.file("t/tiny.h5"));
  // a "faulty" trace that is in fact golden: the gate must notice it does not diverge
  Recorded w = record(case_of("tiny", HMode::f32, 2), "alloc; prefill 2");
  w.header.expect = formats::TraceExpectation{1, 0, 0, "h"};
  formats::write_trace(dir.file("t/faulty/not_faulty.h5"), w.header, w.ops);
  const Shell s = sh(std::string(SSMCHECK_BIN) + " gate --cases 1 --traces " + q(dir.file("t")));
  EXPECT_EQ(s.code, 1) << s.out;
  EXPECT_NE(s.out.find("not_faulty.h5: expected the first divergence at op 1, seq 0, layer 0, h, got none"),
            std::string::npos)
      << s.out;
}

}  // namespace
// fuzz's stdout without the banner, the timing (tests/support/summary_text.h) and the --out
// folder's name: what --jobs must print exactly as one process does.
static std::string fuzz_verdict(const std::string& out, const std::string& out_dir) {
  std::string v;
  for (std::string line : lines_of(out)) {
    if (line.rfind("ssmcheck fuzz: ", 0) == 0) continue;
    for (size_t at; (at = line.find(out_dir)) != std::string::npos;) line.replace(at, out_dir.size(), "OUT");
    v += line + "\n";
  }
  return text_without_times(v);
}

// fuzz --jobs N: the campaign in N processes prints the one-process campaign's summary (its cases,
// ops, coverage and verdict; only the timing differs) and the same JSON verdict; --jobs with the
// exploratory --duration is bad input.
TEST(Fuzz, JobsPrintTheOneProcessCampaign) {
  TempDir dir;
  const std::string fuzz = std::string(SSMCHECK_BIN) + " fuzz --cases 12 --seed 4 --max-ops 20";
  const Shell one = sh("( " + fuzz + " --out " + q(dir.file("one")) + " 2>/dev/null )");
  const Shell three = sh("( unset OMP_NUM_THREADS; " + fuzz + " --jobs 3 --out " + q(dir.file("three")) + " --json " +
                         q(dir.file("v.json")) + " 2>/dev/null )");
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_EQ(three.code, 0) << three.out;
  EXPECT_NE(one.out.find("12 cases (case 0..11 of seed 4)"), std::string::npos) << one.out;
  EXPECT_EQ(fuzz_verdict(three.out, dir.file("three")), fuzz_verdict(one.out, dir.file("one")));
  // the cores shared out among the processes' OpenMP threads, or the user's choice
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency() / 3));
  EXPECT_NE(three.out.find(", in 3 processes of " + threads + " OpenMP threads"), std::string::npos) << three.out;
  const Shell chosen = sh("( OMP_NUM_THREADS=5 " + fuzz + " --jobs 2 --out " + q(dir.file("two")) + " 2>/dev/null )");
  EXPECT_NE(chosen.out.find(", in 2 processes of 5 OpenMP threads"), std::string::npos) << chosen.out;
  std::ifstream v(dir.file("v.json"));
  const nlohmann::json j = nlohmann::json::parse(v);
  EXPECT_EQ(j.at("cases").at(0).at("status"), "pass");
  const Shell timed = sh(fuzz + " --jobs 2 --duration 5 --out " + q(dir.file("t")));
  EXPECT_EQ(timed.code, 2) << timed.out;
  EXPECT_NE(timed.out.find("--jobs"), std::string::npos) << timed.out;
}

// fuzz --layers N without --preset cuts every drawn preset and runs the smaller ones whole: its
// first line says so (it did silently); with --preset, where more layers than the model has is an
// error, nothing is said.
TEST(Fuzz, LayersOnDrawnPresetsIsSaid) {
  TempDir dir;
  const std::string fuzz =
      std::string(SSMCHECK_BIN) + " fuzz --cases 2 --seed 4 --max-ops 10 --out " + q(dir.file("o"));
  const Shell drawn = sh("( " + fuzz + " --layers 3 2>/dev/null )");
  EXPECT_EQ(drawn.code, 0) << drawn.out;
  EXPECT_NE(drawn.out.find("drawn presets cut to their first 3 layers (those with fewer run whole)"), std::string::npos)
      << drawn.out;
  const Shell fixed = sh("( " + fuzz + " --preset odd-d --layers 1 2>/dev/null )");
  EXPECT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_EQ(fixed.out.find("drawn presets"), std::string::npos) << fixed.out;
}

// fuzz --jobs N with a failing mutant: the same failing case, shrunk script, report and dump files
// as one process, and the progress names the first failing case. (That the processes past it are
// stopped instead of running the rest of the 3000 cases is a matter of time, not asserted here:
// by hand, 57 cases were recorded in all.)
TEST(Fuzz, JobsReportTheOneProcessFailure) {
  TempDir dir;
  const std::string fuzz = "SSMCHECK_MUTANT=alt_commit_off_by_one " + std::string(SSMCHECK_MUTANTS_BIN) +
                           " fuzz --cases 3000 --seed 3 --max-ops 30";
  const Shell one = sh("( " + fuzz + " --out " + q(dir.file("one")) + " 2>/dev/null )");
  const Shell three = sh("( unset OMP_NUM_THREADS; " + fuzz + " --jobs 3 --out " + q(dir.file("three")) + " 2>" +
                         q(dir.file("progress")) + " )");
  EXPECT_EQ(one.code, 1) << one.out;
  EXPECT_EQ(three.code, 1) << three.out;
  EXPECT_NE(one.out.find("minimal failing case"), std::string::npos) << one.out;
  EXPECT_EQ(fuzz_verdict(three.out, dir.file("three")), fuzz_verdict(one.out, dir.file("one")));
  for (const char* f : {"case-seed3-case20.model.h5", "case-seed3-case20.sut.h5", "case-seed3-case20.txt"})
    EXPECT_TRUE(fs::exists(dir.file("three") + "/" + f)) << f;
  const std::string p = test::file_bytes(dir.file("progress"));
  EXPECT_NE(p.find("case 20 failed"), std::string::npos) << p;  // the progress names the first failing case
}

// gate --jobs N: each campaign in N processes gives the one-process gate's verdict: every check's
// status, message and shrunk script, and the failing campaign's report without its timings.
TEST(Gate, JobsGiveTheOneProcessVerdict) {
  TempDir dir;
  const std::string gate = " gate --seed 3 --no-coverage --backend reference --traces " + q(traces_dir());
  const std::string mutant = "SSMCHECK_MUTANT=alt_commit_off_by_one " + std::string(SSMCHECK_MUTANTS_BIN) + gate;
  struct Run {
    std::string command, tag;
    int code;
  };
  for (const Run& r :
       {Run{std::string(SSMCHECK_BIN) + gate + " --cases 24", "pass", 0}, Run{mutant + " --cases 60", "fail", 1}}) {
    const std::string one_json = dir.file(r.tag + "-one.json"), three_json = dir.file(r.tag + "-three.json");
    const Shell one = sh("( " + r.command + " --json " + q(one_json) + " 2>/dev/null )");
    const Shell three =
        sh("( unset OMP_NUM_THREADS; " + r.command + " --jobs 3 --json " + q(three_json) + " 2>/dev/null )");
    EXPECT_EQ(one.code, r.code) << one.out;
    EXPECT_EQ(three.code, r.code) << three.out;
    EXPECT_NE(three.out.find(", in 3 processes of "), std::string::npos) << three.out;
    std::ifstream a(one_json), b(three_json);
    const nlohmann::json ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
    ASSERT_EQ(ja.at("cases").size(), jb.at("cases").size());
    size_t campaigns = 0;
    for (size_t i = 0; i < ja.at("cases").size(); ++i) {
      const nlohmann::json &x = ja.at("cases")[i], &y = jb.at("cases")[i];
      for (const char* k : {"suite", "name", "status", "message"})
        EXPECT_EQ(x.at(k), y.at(k)) << r.tag << " case " << i;
      EXPECT_EQ(x.value("shrunk_ops", -1), y.value("shrunk_ops", -1)) << r.tag << " case " << i;
      EXPECT_EQ(text_without_times(x.value("details", "")), text_without_times(y.value("details", "")))
          << r.tag << " case " << i;
      if (x.at("suite") == "campaign.reference") {
        ++campaigns;
        if (r.code == 1) {
          EXPECT_NE(x.at("message").get<std::string>().find("case 20 FAILED"), std::string::npos) << x;
        }
      }
    }
    EXPECT_EQ(campaigns, 1u) << r.tag;
  }
}

}  // namespace ssm::test
