// Likely causes a rerun confirms (replay/convention_hints.h): a trace whose producer computed with
// a convention it did not declare (torch gates; in FP16 h, rows carried in FP32 or stores that
// overflow) diverges with nothing in its states pointing at it; replay reruns it under each single
// change of its conventions and names the one under which it agrees through the divergent op. A
// trace whose divergence is a slip, not a convention, gets no such hint.
#include <gtest/gtest.h>

#include <cstring>

#include "formats/dump.h"
#include "formats/trace.h"
#include "reference/reference_backend.h"
#include "replay/convention_hints.h"
#include "replay/replay.h"
#include "tests/support/trace_support.h"

namespace ssm {
namespace {

using test::case_of;
using test::q;
using test::sh;

// A trace recorded with `numerics` on every layer, whose header then declares the contract's.
formats::Trace undeclared(CaseConfig cfg, const Numerics& numerics, const std::string& script) {
  cfg.numerics = numerics;
  const test::Recorded w = test::record(cfg, script);
  formats::Trace t;
  t.header = w.header;
  t.ops = w.ops;
  for (LayerSpec& l : t.header.model.spec.layers) l.numerics = Numerics{};
  return t;
}

std::vector<std::string> hints_of(formats::Trace& t, replay::ReplayResult* out = nullptr) {
  ref::ReferenceBackend b;
  const replay::ReplayResult r = replay::replay_trace(t, b);
  if (out) *out = r;
  if (r.pass()) return {};
  return replay::convention_hints(
      t, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); }, {}, r.divergences.front().op_index,
      r.bitwise);
}

TEST(ConventionHints, UndeclaredTorchGatesAreNamed) {
  CaseConfig cfg = case_of("tiny", HMode::f32, 3);
  cfg.gen.extreme_gates = true;  // gate inputs past the softplus threshold and the clamps: the conventions differ
  Numerics torch;
  torch.gates = GateMath::torch;
  formats::Trace t = undeclared(cfg, torch, "alloc; prefill 3; decode; verify 2; commit 1 2");
  replay::ReplayResult r;
  const std::vector<std::string> hints = hints_of(t, &r);
  ASSERT_FALSE(r.pass()) << "the undeclared torch gates must diverge under the contract's";
  ASSERT_EQ(hints.size(), 1u) << testing::PrintToString(hints);
  EXPECT_NE(
      hints[0].find("replaying with --gates torch agrees through op " + std::to_string(r.divergences.front().op_index)),
      std::string::npos)
      << hints[0];
  EXPECT_NE(hints[0].find("torch gates"), std::string::npos) << hints[0];
  // the trace is as it was
  for (const LayerSpec& l : t.header.model.spec.layers) EXPECT_TRUE(l.numerics.is_contract());
}

TEST(ConventionHints, UndeclaredCarriedRowsAreNamed) {
  CaseConfig cfg = case_of("tiny", HMode::f16, 4);
  cfg.gen.value_scale = 30;
  Numerics carried;
  carried.f16_rows = F16Rows::carried;
  formats::Trace t = undeclared(cfg, carried, "alloc; prefill 3; to_f16; verify 4; commit 2 4; decode");
  // carried and stored rows differ by FP16 roundings, inside the classes: the trace diverges only
  // where bits are promised (recorded by these numerics), and the hint is confirmed bit for bit
  ref::ReferenceBackend here;
  t.header.build = formats::build_id(here);
  replay::ReplayResult r;
  const std::vector<std::string> hints = hints_of(t, &r);
  ASSERT_FALSE(r.pass()) << "rows carried in FP32 across a verify must differ from stored ones";
  ASSERT_EQ(hints.size(), 1u) << testing::PrintToString(hints);
  EXPECT_NE(hints[0].find("replaying with --f16-rows carried agrees"), std::string::npos) << hints[0];
}

TEST(ConventionHints, ASlipIsNotAConvention) {
  CaseConfig cfg = case_of("tiny", HMode::f16, 5);
  test::Recorded w = test::record(cfg, "alloc; prefill 3; to_f16; decode; verify 3; commit 1 3");
  formats::Trace t;
  t.header = w.header;
  t.ops = w.ops;
  // h after the commit perturbed far beyond any convention's difference
  Tensor& h = t.ops[5].states[0].state.layers[0].h;
  for (int64_t e = 0; e < h.size(); e += 7) {
    if (h.dtype() == DType::f16) h.f16()[e] ^= 0x4400;  // exponent bits: far off, finite
    else h.f32()[e] = h.f32()[e] * 2.0f + 1.0f;
  }
  replay::ReplayResult r;
  const std::vector<std::string> hints = hints_of(t, &r);
  ASSERT_FALSE(r.pass());
  EXPECT_EQ(r.divergences.front().op_index, 5);
  EXPECT_TRUE(hints.empty()) << testing::PrintToString(hints);
}

// `ssmcheck replay` prints the hint and writes it in the JSON.
TEST(ConventionHints, ReplayPrintsTheHint) {
  test::TempDir d("ssmcheck-hints");
  CaseConfig cfg = case_of("tiny", HMode::f32, 3);
  cfg.gen.extreme_gates = true;
  Numerics torch;
  torch.gates = GateMath::torch;
  const formats::Trace t = undeclared(cfg, torch, "alloc; prefill 3; decode");
  formats::write_trace(d.file("t.h5"), t.header, t.ops);
  const auto out = sh(std::string(SSMCHECK_BIN) + " replay " + q(d.file("t.h5")) + " --json " + q(d.file("v.json")));
  EXPECT_EQ(out.code, 1) << out.out;
  EXPECT_NE(out.out.find("likely cause: replaying with --gates torch agrees through op"), std::string::npos) << out.out;
  const auto again = sh(std::string(SSMCHECK_BIN) + " replay " + q(d.file("t.h5")) + " --gates torch");
  EXPECT_EQ(again.code, 0) << again.out;
  const auto json = sh("grep -c 'convention_hints' " + q(d.file("v.json")));
  EXPECT_EQ(json.out.substr(0, 1), "1") << json.out;
}

}  // namespace
}  // namespace ssm
