// Implementations that run part of the contract (core/capabilities.h): the value itself, a
// vLLM-like partial plug-in (tests/plugins/partial_plugin.cpp: FP32 GDN only, no snapshots, no
// async path, no padding rows, small limits; it fails any call outside its declaration) through
// fuzz, replay and the gate, the gate's --h-mode and --preset filters, and "nothing checked".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/capabilities.h"
#include "fuzz/lockstep.h"
#include "tests/support/shell.h"
#include "tests/support/file_bytes.h"

namespace ssm {
namespace {

const std::string kBin = SSMCHECK_BIN;
const std::string kPartial = "plugin:" + std::string(SSMCHECK_PARTIAL_PLUGIN);
const std::string kTraces = std::string(SSMCHECK_FIXTURES_DIR) + "/traces";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Capabilities, EverythingRunsEveryOpAndModel) {
  const Capabilities c = Capabilities::everything();
  for (OpKind k : all_op_kinds()) EXPECT_TRUE(c.runs(k)) << op_name(k);
  EXPECT_EQ(c.cannot_run(make_preset("hybrid-odd"), HMode::f16_pool, "x"), "");
  EXPECT_EQ(c.cannot_run(make_preset("ple-odd"), "x"), "");
  EXPECT_EQ(c.cannot_run(parse_op("verify 9 wy @0,pad,1"), "x"), "");
  EXPECT_EQ(c.cannot_run_slots(1000, "x"), "");
}

TEST(Capabilities, SayWhyNotNamingWhatIsOutside) {
  Capabilities c;
  c.kinds = {LayerKind::gdn};
  c.ple = false;
  c.h_modes = {HMode::f32};
  c.snapshots = false;
  c.checkpoint_async = false;
  c.verify_arms = {VerifyArm::exact};
  c.pad_rows = false;
  c.max_batch = 2;
  c.max_verify_k = 3;
  c.max_slots = 2;
  EXPECT_NE(c.cannot_run(make_preset("tiny"), HMode::f16, "p").find("h mode f16; p runs h modes f32 only"),
            std::string::npos);
  EXPECT_NE(c.cannot_run(make_preset("hybrid-odd"), HMode::f32, "p").find("p runs gdn layers only"), std::string::npos);
  EXPECT_NE(c.cannot_run(make_preset("ple-tiny"), "p").find("does not run PLE carries"), std::string::npos);
  EXPECT_EQ(c.cannot_run(make_preset("tiny"), HMode::f32, "p"), "");
  EXPECT_NE(c.cannot_run(parse_op("snapshot_save 0"), "p").find("snapshot_save: p does not implement it"),
            std::string::npos);
  EXPECT_NE(c.cannot_run(parse_op("checkpoint_async"), "p"), "");
  EXPECT_EQ(c.cannot_run(parse_op("rollback_and_checkpoint_async 1"), "p"), "");
  EXPECT_NE(c.cannot_run(parse_op("to_f16"), "p"), "");
  EXPECT_NE(c.cannot_run(parse_op("verify 2 wy"), "p").find("verify arm wy"), std::string::npos);
  EXPECT_NE(c.cannot_run(parse_op("decode @0,pad"), "p").find("padding rows"), std::string::npos);
  EXPECT_NE(c.cannot_run(parse_op("decode @0,1,2"), "p").find("at most 2"), std::string::npos);
  EXPECT_NE(c.cannot_run(parse_op("verify 4"), "p").find("verify K = 4"), std::string::npos);
  EXPECT_EQ(c.cannot_run(parse_op("verify 3 @0,1"), "p"), "");
  EXPECT_NE(c.cannot_run_slots(3, "p"), "");
  EXPECT_NO_THROW(c.validate("p"));
  Capabilities none = c;
  none.h_modes.clear();
  try {
    none.validate("p");
    ADD_FAILURE() << "no h mode accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("h_modes"), std::string::npos) << e.what();
  }
}

// An engine's trace declaring other numerics (issue 40 item 2) is skipped on an implementation of
// the contract's only (the CUDA backend), naming the layer and what it declares, instead of failing.
TEST(Capabilities, ContractNumericsOnlySayWhichLayerDeclaresOthers) {
  Capabilities c;
  ModelSpec spec = make_preset("odd-a");
  EXPECT_EQ(c.cannot_run(spec, "p"), "");
  c.other_numerics = false;
  EXPECT_EQ(c.cannot_run(spec, "p"), "") << "contract numerics run";
  spec.layers[1].numerics.gates = GateMath::torch;
  EXPECT_EQ(c.cannot_run(spec, "p"), "layer 1 declares --gates torch; p implements the contract's numerics only");
  c.other_numerics = true;
  EXPECT_EQ(c.cannot_run(spec, "p"), "");
}

TEST(Capabilities, CoverageAsksOnlyForWhatItRuns) {
  Capabilities c;
  c.kinds = {LayerKind::gdn};
  c.ple = false;
  c.h_modes = {HMode::f32};
  c.pad_rows = false;
  const std::vector<std::string> req = fuzz::Coverage::required(/*paused_async=*/true, c);
  const auto has = [&](const std::string& s) { return std::find(req.begin(), req.end(), s) != req.end(); };
  EXPECT_TRUE(has("h mode f32"));
  EXPECT_FALSE(has("h mode f16"));
  EXPECT_FALSE(has("async reads deferred")) << "no async path: not asked to reach one";
  EXPECT_FALSE(has("batch of >= 200 rows"));
  EXPECT_FALSE(has("layers hosting a PLE carry"));
  for (const std::string& r : req) EXPECT_EQ(r.find("FP16"), std::string::npos) << r;
  const std::vector<std::string> all = fuzz::Coverage::required(true, Capabilities::everything());
  EXPECT_GT(all.size(), req.size());
  EXPECT_TRUE(std::find(all.begin(), all.end(), "async reads deferred") != all.end());
}

TEST(PartialPlugin, DeclaresWhatItRuns) {
  const auto s = test::sh(kBin + " backends " + test::q(kPartial));
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("gdn layers; no PLE carry; h modes f32; verify arms exact"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("no async path"), std::string::npos) << s.out;
}

// The campaign draws only inside the declaration: the plug-in fails any call outside it.
TEST(PartialPlugin, CampaignStaysInsideItsCapabilities) {
  const auto s = test::sh(kBin + " fuzz --backend " + test::q(kPartial) + " --cases 60 --seed 11");
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("passed"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("outside its declared capabilities"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("h mode f16"), std::string::npos) << s.out;
}

TEST(PartialPlugin, AFixedModeOutsideItChecksNothing) {
  const auto s = test::sh(kBin + " fuzz --backend " + test::q(kPartial) + " --cases 5 --h-mode f16");
  EXPECT_EQ(s.code, 5) << s.out;
  EXPECT_NE(s.out.find("nothing was checked"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("runs h modes f32 only"), std::string::npos) << s.out;
  const auto p = test::sh(kBin + " fuzz --backend " + test::q(kPartial) + " --cases 5 --preset mamba-tiny");
  EXPECT_EQ(p.code, 5) << p.out;
  EXPECT_NE(p.out.find("runs gdn layers only"), std::string::npos) << p.out;
}

// A trace a vLLM-like engine could record: FP32, GDN, no snapshot, no padding row, small batches.
std::string record_partial_trace(const std::string& path) {
  const auto r = test::sh(kBin + " record --preset tiny --h-mode f32 --slots 2 --capacity 3 --conv-capacity 3 --ops " +
                          test::q("alloc; alloc @1; prefill 5; prefill 3 @1; checkpoint; verify 3 @0,1; commit 2 3; "
                                  "checkpoint_async @1; decode @1,0; rollback 1 @1; decode") +
                          " -o " + test::q(path));
  EXPECT_EQ(r.code, 0) << r.out;
  return path;
}

// The gate: every trace it cannot run is skipped with its reason and counted; the rest and the
// campaign (coverage asked only of what it runs) pass.
TEST(PartialPlugin, PassesTheGateWithTheRestSkippedAndCounted) {
  test::TempDir dir;
  const std::string traces = dir.path() + "/traces";
  std::filesystem::create_directories(traces + "/faulty");
  record_partial_trace(traces + "/engine_f32.h5");
  std::filesystem::copy_file(kTraces + "/odd_a_f16_every_op.h5", traces + "/odd_a_f16_every_op.h5");
  std::filesystem::copy_file(kTraces + "/faulty/f16_h_perturbed.h5", traces + "/faulty/f16_h_perturbed.h5");
  const std::string json = dir.path() + "/v.json", junit = dir.path() + "/v.xml";
  const auto s = test::sh(kBin + " gate --backend " + test::q(kPartial) + " --cases 300 --traces " + test::q(traces) +
                          " --json " + test::q(json) + " --junit " + test::q(junit));
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("result: PASS (2 of 4 checks skipped)"), std::string::npos) << s.out;
  const nlohmann::json v = read_json(json);
  EXPECT_TRUE(v["pass"].get<bool>());
  EXPECT_FALSE(v["nothing_checked"].get<bool>());
  EXPECT_EQ(v["counts"], nlohmann::json({{"pass", 2}, {"fail", 0}, {"skipped", 2}})) << v.dump(2);
  bool engine_passed = false, campaign_passed = false;
  for (const auto& c : v["cases"]) {
    const std::string name = c["name"], status = c["status"], msg = c["message"];
    if (name == "engine_f32.h5") engine_passed = status == "pass";
    if (c["suite"].get<std::string>().rfind("campaign.", 0) == 0) campaign_passed = status == "pass";
    if (name.find("f16") != std::string::npos) {
      EXPECT_EQ(status, "skipped") << name;
      EXPECT_NE(msg.find("skipped: h mode f16"), std::string::npos) << msg;
      EXPECT_NE(msg.find("runs h modes f32 only"), std::string::npos) << msg;
    }
  }
  EXPECT_TRUE(engine_passed) << s.out;
  EXPECT_TRUE(campaign_passed) << s.out;
  const std::string xml = test::file_bytes(junit);
  EXPECT_NE(xml.find("tests=\"4\" failures=\"0\" skipped=\"2\""), std::string::npos) << xml.substr(0, 400);
}

TEST(Replay, EverySkippedChecksNothingAndAPartOfThemIsCounted) {
  test::TempDir dir;
  const std::string f16 = kTraces + "/odd_a_f16_every_op.h5", f32 = record_partial_trace(dir.path() + "/e.h5");
  const auto all = test::sh(kBin + " replay " + test::q(f16) + " --backend " + test::q(kPartial));
  EXPECT_EQ(all.code, 5) << all.out;
  EXPECT_NE(all.out.find("NOTHING CHECKED"), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("all agree"), std::string::npos) << all.out;
  const auto part = test::sh(kBin + " replay " + test::q(f16) + " " + test::q(f32) + " --backend " + test::q(kPartial));
  EXPECT_EQ(part.code, 0) << part.out;
  EXPECT_NE(part.out.find("all agree (1 of 2 checks skipped)"), std::string::npos) << part.out;
  // a golden trace using what it lacks (a WY verify, snapshots): skipped naming the op
  const auto ops =
      test::sh(kBin + " replay " + test::q(kTraces + "/tiny_f32_every_op.h5") + " --backend " + test::q(kPartial));
  EXPECT_EQ(ops.code, 5) << ops.out;
  EXPECT_NE(ops.out.find("skipped (op "), std::string::npos) << ops.out;
}

TEST(Gate, HModeAndPresetFiltersSkipAndCountTheRest) {
  test::TempDir dir;
  const std::string json = dir.path() + "/v.json";
  const auto s = test::sh(kBin + " gate --backend reference --h-mode f32 --cases 20 --no-coverage --traces " +
                          test::q(kTraces) + " --json " + test::q(json));
  EXPECT_EQ(s.code, 0) << s.out;
  const nlohmann::json v = read_json(json);
  int f16_skipped = 0, f32_checked = 0;
  for (const auto& c : v["cases"]) {
    const std::string name = c["name"], status = c["status"];
    if (name.find("f16") != std::string::npos && status == "skipped") ++f16_skipped;
    if (name.find("_f32_") != std::string::npos && status == "pass") ++f32_checked;
  }
  EXPECT_GE(f16_skipped, 5) << s.out;
  EXPECT_GE(f32_checked, 4) << s.out;
  const auto p = test::sh(kBin + " gate --backend reference --preset tiny --cases 10 --traces " + test::q(kTraces) +
                          " --json " + test::q(json));
  EXPECT_EQ(p.code, 0) << p.out;
  const nlohmann::json w = read_json(json);
  for (const auto& c : w["cases"]) {
    const std::string name = c["name"], status = c["status"];
    if (name.rfind("tiny_", 0) == 0 && c["suite"] == "replay.golden.reference") {
      EXPECT_EQ(status, "pass") << name;
    }
    if (name.rfind("odd_", 0) == 0) {
      EXPECT_EQ(status, "skipped") << name;
    }
  }
  // a filter that leaves nothing: exit 5, not a pass
  const auto none =
      test::sh(kBin + " gate --backend " + test::q(kPartial) + " --h-mode f16 --cases 5 --traces " + test::q(kTraces));
  EXPECT_EQ(none.code, 5) << none.out;
  EXPECT_NE(none.out.find("NOTHING CHECKED"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace ssm
