// Replay from anywhere (replay/start_point.h, replay/bisect.h) and reduce (replay/reduce.h):
// --from and --bisect agree with a full replay on every golden and faulty fixture and on a long
// trace with a planted late fault (bisect: the same first divergent op in O(log n) segments);
// a reduced trace of each faulty fixture and of a planted commit slip in a long trace is a few
// ops that diverge in the same field with the same likely cause, and replays standalone.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fmt/core.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "replay/bisect.h"
#include "replay/reduce.h"
#include "replay/replay.h"
#include "replay/start_point.h"
#include "tests/support/trace_support.h"

namespace ssm::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> fixture_traces() {
  std::vector<std::string> v;
  const std::string dir = std::string(SSMCHECK_FIXTURES_DIR) + "/traces";
  for (const std::string sub : {"", "/faulty"})
    for (const auto& e : fs::directory_iterator(dir + sub))
      if (e.path().extension() == ".h5") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::string where(const replay::ReplayResult& r) { return r.pass() ? "agree" : r.divergences.front().headline(); }

TEST(ReplayFrom, FromEveryStartPointAndBisectAgreeWithAFullReplayOnEveryFixture) {
  const auto traces = fixture_traces();
  ASSERT_GE(traces.size(), 20u);
  int starts_tried = 0, diverging = 0;
  for (const std::string& path : traces) {
    SCOPED_TRACE(path);
    const formats::Trace t = formats::read_trace(path);
    ref::ReferenceBackend b;
    const replay::ReplayResult full = replay::replay_trace(t, b);
    const int d = full.pass() ? int(t.ops.size()) : full.divergences.front().op_index;
    diverging += full.pass() ? 0 : 1;
    for (int s : replay::start_points(t)) {
      if (s >= d) break;  // a start after the divergence skips it
      replay::ReplayOptions o;
      o.start = s;
      const replay::ReplayResult r = replay::replay_trace(t, b, o);
      EXPECT_EQ(where(r), where(full)) << "from the state after op " << s;
      EXPECT_EQ(r.started_after, s);
      EXPECT_EQ(r.ops_run, (full.pass() ? int(t.ops.size()) : d + 1) - (s + 1));
      ++starts_tried;
    }
    const replay::BisectResult bi = replay::bisect_trace(t, b);
    EXPECT_EQ(where(bi.last), where(full));
    EXPECT_LE(bi.segments.size(), size_t(std::ceil(std::log2(double(bi.boundaries.size())))) + 1);
    EXPECT_EQ(bi.last.states_compared <= full.states_compared, true);
    if (full.pass()) {
      EXPECT_EQ(bi.last.states_compared, full.states_compared);
      EXPECT_EQ(bi.last.outputs_compared, full.outputs_compared);
      EXPECT_EQ(bi.ops_replayed, int(t.ops.size()));
    }
    if (t.header.expect) {
      EXPECT_TRUE(bi.last.matches(*t.header.expect));
    }
  }
  std::printf("%zu fixtures (%d diverge), replayed from %d start points and bisected\n", traces.size(), diverging,
              starts_tried);
  EXPECT_GE(diverging, 10);
  EXPECT_GE(starts_tried, 100);  // most fixtures record every live sequence in every layer after every op
}

// A long trace of two sequences (states of every layer after every op): `cycles` rounds of
// checkpoint, verify 4, commit, decode on each.
std::string long_script(int cycles) {
  std::string s = "alloc @0; alloc @1; prefill 5 @0; prefill 3 @1";
  for (int c = 0; c < cycles; ++c)
    for (int q : {0, 1}) {
      const int n = 1 + (c * 7 + q * 3) % 3;  // accepted rows 1..3 of 4: never 2 on seq 1 before the end
      s += fmt::format("; checkpoint @{}; verify 4 @{}; commit {} 4 @{}; decode @{}", q, q, q == 1 && n == 2 ? 3 : n, q,
                       q);
    }
  return s + "; checkpoint @1; verify 4 @1; commit 2 4 @1; decode @1; decode @0";
}

TEST(ReplayFrom, BisectFindsALateFaultInAFewSegmentsAndFromSkipsToIt) {
  TempDir dir;
  const Recorded rec = record(case_of("tiny", HMode::f32, 11), long_script(40));
  formats::Trace t;
  t.header = rec.header;
  t.ops = rec.ops;
  const int fault = int(t.ops.size()) - 3;  // the last commit 2 4 @1: its recorded h one ULP off
  ASSERT_EQ(to_string(t.ops[size_t(fault)].op), "commit 2 4 @1");
  for (formats::TraceState& s : t.ops[size_t(fault)].states)
    if (s.seq == 1) s.state.layers.at(1).h.f32()[5] = std::nextafter(s.state.layers.at(1).h.f32()[5], 1e30f);
  ref::ReferenceBackend b;
  replay::ReplayOptions bitwise;
  bitwise.strictness = cmp::Strictness::bitwise;
  const replay::ReplayResult full = replay::replay_trace(t, b, bitwise);
  ASSERT_FALSE(full.pass());
  EXPECT_EQ(full.divergences.front().op_index, fault);
  const replay::BisectResult bi = replay::bisect_trace(t, b, bitwise);
  ASSERT_FALSE(bi.pass());
  EXPECT_EQ(bi.last.divergences.front().headline(), full.divergences.front().headline());
  EXPECT_GE(bi.segments.size(), 5u) << bi.text();  // the fault is in the last few ops: halving runs
  EXPECT_LE(bi.segments.size(), size_t(std::ceil(std::log2(double(bi.boundaries.size())))) + 1) << bi.text();
  EXPECT_EQ(bi.ops_replayed, fault + 1);
  std::printf("%zu ops, fault at op %d: bisected in %zu segments over %zu boundaries\n", t.ops.size(), fault,
              bi.segments.size(), bi.boundaries.size());
  // the command line: --from says what it skipped, --bisect its segments, both find the op
  const std::string path = dir.file("long.h5");
  formats::write_trace(path, t.header, t.ops);
  const Shell from = sh(std::string(SSMCHECK_BIN) + " replay " + q(path) + " --bitwise --from " +
                        std::to_string(fault - 2) + " --json " + q(dir.file("from.json")));
  EXPECT_EQ(from.code, 1) << from.out;
  EXPECT_NE(from.out.find(fmt::format("starting from the recorded state after op {} ", fault - 2)), std::string::npos)
      << from.out;
  EXPECT_NE(from.out.find(fmt::format("ops 0..{} are not replayed", fault - 2)), std::string::npos) << from.out;
  EXPECT_NE(from.out.find(fmt::format("FIRST DIVERGENCE at op {} 'commit 2 4 @1'", fault)), std::string::npos)
      << from.out;
  std::ifstream js(dir.file("from.json"));
  const nlohmann::json j = nlohmann::json::parse(js);
  EXPECT_EQ(j["results"][0]["started_after"], fault - 2);
  EXPECT_EQ(j["results"][0]["ops_skipped"], fault - 1);  // ops 0..fault-2
  const Shell bis = sh(std::string(SSMCHECK_BIN) + " replay " + q(path) + " --bitwise --bisect");
  EXPECT_EQ(bis.code, 1) << bis.out;
  EXPECT_NE(bis.out.find(fmt::format("FIRST DIVERGENCE at op {} 'commit 2 4 @1'", fault)), std::string::npos)
      << bis.out;
  EXPECT_NE(bis.out.find("segment(s):"), std::string::npos) << bis.out;
  EXPECT_NE(bis.out.find("not replayed (after the first divergence)"), std::string::npos) << bis.out;
}

TEST(ReplayFrom, AnOpWithoutAFullStateSaysSoAndBadOpsAreRefused) {
  const std::string path =
      std::string(SSMCHECK_FIXTURES_DIR) + "/traces/qwen3_next_80b_f16.h5";  // state of layer 1 only
  const Shell r = sh(std::string(SSMCHECK_BIN) + " replay " + q(path) + " --from 5");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--from 5: no op at or before it has a recorded state of every live sequence in every layer"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("replaying from op 0"), std::string::npos) << r.out;
  const Shell beyond = sh(std::string(SSMCHECK_BIN) + " replay " + q(path) + " --from 99");
  EXPECT_EQ(beyond.code, 2) << beyond.out;
  EXPECT_NE(beyond.out.find("--from 99: the trace has ops 0..6"), std::string::npos) << beyond.out;
  const Shell both = sh(std::string(SSMCHECK_BIN) + " replay " + q(path) + " --from 1 --bisect");
  EXPECT_EQ(both.code, 2) << both.out;
  const formats::Trace t = formats::read_trace(path);
  EXPECT_NE(replay::why_not_start(t, 3).find("the state of live seq 0 is not recorded"), std::string::npos)
      << replay::why_not_start(t, 3);
  EXPECT_NE(replay::why_not_start(t, 6).find("is recorded in 1 of the 2 layers"), std::string::npos)
      << replay::why_not_start(t, 6);
  EXPECT_THROW(replay::start_point(t, 6), std::invalid_argument);
  EXPECT_TRUE(replay::start_points(t).empty());
}

TEST(ReplayFrom, ABackendThatCannotImportAStateIsRefusedByName) {
  const std::string path = std::string(SSMCHECK_FIXTURES_DIR) + "/traces/tiny_f32_every_op.h5";
  const Shell r = sh(std::string(SSMCHECK_BIN) + " replay " + q(path) +
                     " --from 5 --backend plugin:" + q(SSMCHECK_REFERENCE_PLUGIN));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cannot import a recorded state (Backend::import_state): replay it from op 0"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("on plugin:"), std::string::npos) << r.out;
}

// A backend with a planted slip: `commit 2 4` on pool slot 1 restores intermediate n instead of n-1.
class CommitSlip : public ref::ReferenceBackend {
 public:
  std::string name() const override { return "commit-slip"; }
  void commit(int slot, int n, int k) override {
    ReferenceBackend::commit(slot, slot == 1 && n == 2 && k == 4 ? 3 : n, k);
  }
};

// max_ops: from a recorded full state before the divergence; without one the cut starts at op 0
// and keeps the ops the divergent sequence needs from there (alloc, prefill, ...): max_ops + 3.
void expect_reduced(const formats::Trace& t, Backend& b, const std::string& out_path, int max_ops) {
  const replay::ReduceResult r = replay::reduce_trace(t, b);
  ASSERT_TRUE(r.diverged);
  EXPECT_LE(r.after.ops, r.start_after >= 0 ? max_ops : max_ops + 3) << r.text();
  std::printf("reduced %s: %s", t.source.c_str(), r.text().c_str());
  EXPECT_LE(r.after.ops, r.before.ops);
  EXPECT_LE(r.after.layers, r.before.layers);
  EXPECT_EQ(r.reproduced.what, r.original.what) << r.text();
  EXPECT_EQ(r.reproduced.tensor, r.original.tensor) << r.text();
  EXPECT_EQ(r.reproduced.seq, r.original.seq) << r.text();
  EXPECT_EQ(r.reproduced.json.value("hints", nlohmann::json::array()).size(),
            r.original.json.value("hints", nlohmann::json::array()).size())
      << r.text();
  // standalone: written, read back (its /start included) and replayed, it diverges there again
  formats::write_trace(out_path, r.reduced.header, r.reduced.ops);
  const formats::Trace back = formats::read_trace(out_path);
  EXPECT_EQ(back.header.start.size(), r.reduced.header.start.size());
  const replay::ReplayResult again = replay::replay_trace(back, b);
  ASSERT_FALSE(again.pass());
  EXPECT_EQ(again.divergences.front().headline(), r.reproduced.headline());
  ASSERT_TRUE(back.header.expect);
  EXPECT_TRUE(again.matches(*back.header.expect));
}

TEST(Reduce, EveryFaultyFixtureReducesToAFewOpsThatDivergeInTheSameField) {
  TempDir dir;
  int n = 0;
  for (const std::string& path : fixture_traces()) {
    if (path.find("/faulty/") == std::string::npos) continue;
    SCOPED_TRACE(path);
    ref::ReferenceBackend b;
    expect_reduced(formats::read_trace(path), b, dir.file(fs::path(path).filename().string()), 3);
    ++n;
  }
  EXPECT_GE(n, 10);
}

TEST(Reduce, APlantedSlipInALongTraceReducesToAFewOps) {
  TempDir dir;
  const Recorded rec = record(case_of("tiny", HMode::f32, 12), long_script(60));
  formats::Trace t;
  t.header = rec.header;
  t.ops = rec.ops;
  ASSERT_GE(t.ops.size(), 480u);
  CommitSlip slip;
  const replay::ReplayResult full = replay::replay_trace(t, slip);
  ASSERT_FALSE(full.pass());
  EXPECT_EQ(full.divergences.front().op, "commit 2 4 @1");
  expect_reduced(t, slip, dir.file("min.h5"), 2);
  // the command line: the reduction table, and the reduced trace replays to the same place
  const std::string path = dir.file("long.h5");
  formats::write_trace(path, t.header, t.ops);
  // (the slip exists only in this test's backend: on the reference the long trace agrees)
  const Shell agree = sh(std::string(SSMCHECK_BIN) + " reduce " + q(path) + " -o " + q(dir.file("none.h5")));
  EXPECT_EQ(agree.code, 5) << agree.out;
  EXPECT_NE(agree.out.find("nothing to reduce"), std::string::npos) << agree.out;
  EXPECT_FALSE(fs::exists(dir.file("none.h5")));
}

TEST(Reduce, TheCommandLineReportsTheReductionAndWritesAStandaloneTrace) {
  TempDir dir;
  const std::string in = std::string(SSMCHECK_FIXTURES_DIR) + "/traces/faulty/flip_h_after_commit.h5";
  const Shell r = sh(std::string(SSMCHECK_BIN) + " reduce " + q(in) + " -o " + q(dir.file("min.h5")) + " --json " +
                     q(dir.file("r.json")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("before"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("after"), std::string::npos) << r.out;
  std::ifstream js(dir.file("r.json"));
  const nlohmann::json j = nlohmann::json::parse(js);
  EXPECT_EQ(j["schema"], "ssmcheck-reduce");
  EXPECT_GT(j["before"]["bytes"].get<int64_t>(), j["after"]["bytes"].get<int64_t>());
  EXPECT_LT(j["after"]["ops"].get<int>(), j["before"]["ops"].get<int>());
  EXPECT_EQ(j["reduced"]["tensor"], j["original"]["tensor"]);
  const Shell rep = sh(std::string(SSMCHECK_BIN) + " replay " + q(dir.file("min.h5")));
  EXPECT_EQ(rep.code, 1) << rep.out;
  EXPECT_NE(rep.out.find("pinpointed"), std::string::npos) << rep.out;
}

}  // namespace
}  // namespace ssm::test
