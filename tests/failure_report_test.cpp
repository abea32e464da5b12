// What a failure report says, on slips planted in tests/plugins/slip_plugin.cpp: the likely cause
// of each (compare/likely_cause.h), the shrunk configuration and the failure as JSON fields
// (fuzz/simplify.h, CampaignResult::evidence), a failure that does not recur said to be one, a
// systematic bias far inside the tolerance flagged (fuzz/bias.h), and the cases a --duration
// campaign ran named so they replay. The same plug-in without a slip gets none of it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "tests/support/shell.h"

namespace ssm {
namespace {

const std::string kBin = SSMCHECK_BIN;
const std::string kSlip = "plugin:" + std::string(SSMCHECK_SLIP_PLUGIN);

struct Slip {
  const char* name;
  const char* flags;  // case flags
  const char* ops;
  const char* hint;              // what the likely-cause line must say
  const char* absent = nullptr;  // what no line may say (a misleading reading of the same evidence)
};

class LikelyCause : public ::testing::TestWithParam<Slip> {};

TEST_P(LikelyCause, ThePlantedSlipIsNamed) {
  const Slip& s = GetParam();
  const auto r = test::sh(kBin + " check " + s.flags + " --backend " + test::q(kSlip + ",slip=" + s.name) + " --ops " +
                          test::q(s.ops));
  EXPECT_EQ(r.code, 1) << r.out;
  const size_t at = r.out.find("likely cause: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(s.hint, at), std::string::npos) << "expected a hint saying: " << s.hint << "\n" << r.out;
  if (s.absent) {
    EXPECT_EQ(r.out.find(s.absent, at), std::string::npos) << "a misleading hint: " << s.absent << "\n" << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Slips, LikelyCause,
    ::testing::Values(
        Slip{"commit_off_by_one", "--preset tiny", "alloc; prefill 3; checkpoint; verify 4; commit 1 4",
             "commit restores intermediate n instead of n-1?", "shifted"},
        Slip{"rollback_off_by_one", "--preset tiny", "alloc; prefill 3; checkpoint; verify 4; rollback 1",
             "rollback restores intermediate n instead of n-1?", "shifted"},
        Slip{"h_transposed", "--preset tiny", "alloc; prefill 3",
             "h is the reference's h with its last two axes swapped"},
        Slip{"conv_shifted_twice", "--preset tiny", "alloc; prefill 3", "the window shifted one column too far"},
        // judged below one FP16 step at 65504: the default classes admit an inf-vs-65504 pair as one
        // step (docs/tolerances.md, "FP16's overflow boundary"), so an export-only slip would pass
        Slip{"f16_store_inf", "--preset tiny --h-mode f16 --value-scale 200000 --tolerance fp16-state.max_ulp=0.5",
             "alloc; prefill 4; to_f16; decode; decode", "FP16 stores overflow to inf"},
        Slip{"intermediates_one_off", "--preset tiny", "alloc; prefill 2; checkpoint; verify 4",
             "intermediates one row off"},
        Slip{"checkpoint_aliased", "--preset tiny", "alloc; prefill 2; checkpoint; decode",
             "the checkpoint follows the live state"},
        // a convention, not a slip of the states: confirmed by rerunning the case under it
        Slip{"gates_torch", "--preset tiny --extreme-gates", "alloc; prefill 3; decode",
             "the case passes when the reference computes torch gates (softplus linear above 20, no clamps)",
             "FP16 stores"},
        // slips that leave nothing in the states to match, confirmed by a rerun of the reference making them
        Slip{"heads_tiled", "--preset odd-a", "alloc; prefill 3; decode",
             "the case passes when the reference maps heads tiled (GDN value head v reads key head v % nk"},
        Slip{"heads_tiled", "--preset mamba-tiny", "alloc; prefill 3",
             "the case passes when the reference maps heads tiled (Mamba-2 head h reads group h % ng"},
        Slip{"pad_into_slot0", "--preset tiny --slots 3", "alloc; alloc @1; prefill 3; prefill 2 @1; decode @1,pad",
             "the case passes when the reference writes each padding row's update into pool slot 0",
             "the slot of the live row before it"},
        Slip{"pad_into_slot0", "--preset mamba-tiny --slots 3", "alloc; alloc @1; prefill 2 @1; verify 3 @1,pad",
             "writes padding rows into a claimed slot instead of the dummy slot (a padding slot id clamped to 0?)"}),
    [](const ::testing::TestParamInfo<Slip>& i) { return std::string(i.param.name) + "_" + std::to_string(i.index); });

// A campaign's failing case is rerun under each single change of its conventions: an implementation
// computing torch gates without declaring them is named so, in the summary and in the evidence.
TEST(LikelyCauseCampaign, AnUndeclaredConventionIsNamed) {
  test::TempDir dir;
  const std::string json = dir.path() + "/v.json";
  const auto r = test::sh(kBin + " fuzz --backend " + test::q(kSlip + ",slip=gates_torch") +
                          " --cases 200 --seed 7 --json " + test::q(json));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("likely cause: the case passes when the reference computes torch gates"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(SSMP_GATES_TORCH; a Python class: gates = \"torch\"; --gates torch)?"), std::string::npos)
      << r.out;
  std::ifstream in(json);
  const nlohmann::json v = nlohmann::json::parse(in);
  const nlohmann::json& hints = v["cases"][0]["evidence"]["convention_hints"];
  ASSERT_EQ(hints.size(), 1u) << hints.dump(2);
  EXPECT_NE(hints[0].get<std::string>().find("torch gates"), std::string::npos);
}

// A correct implementation gets no hint: a hint appears only with a divergence.
TEST(LikelyCauseCampaign, ACorrectPluginGetsNoHint) {
  const auto r = test::sh(kBin + " fuzz --backend " + test::q(kSlip) + " --cases 150 --seed 404");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("likely cause"), std::string::npos) << r.out;
}

// The rerun checks run on every failing case; one failing for another slip gets no tiled-heads or
// padding hint: on presets where tiling differs (odd-a: nv/nk = 3; mamba-tiny: nh/ng = 2), with
// padding rows drawn, a commit slip is named as itself only.
TEST(LikelyCauseCampaign, AnotherSlipGetsNoHeadOrPaddingHint) {
  for (const char* preset : {"odd-a", "mamba-tiny"}) {
    const auto r = test::sh(kBin + " fuzz --backend " + test::q(kSlip + ",slip=commit_off_by_one") + " --preset " +
                            preset + " --cases 300 --seed 404");
    EXPECT_EQ(r.code, 1) << preset << "\n" << r.out;
    EXPECT_NE(r.out.find("commit restores intermediate n instead of n-1?"), std::string::npos) << preset << "\n"
                                                                                               << r.out;
    EXPECT_EQ(r.out.find("maps heads tiled"), std::string::npos) << preset << "\n" << r.out;
    EXPECT_EQ(r.out.find("each padding row's update"), std::string::npos) << preset << "\n" << r.out;
  }
  // shrinking drops padding rows the slip does not need; a check keeps them, and the padding reruns run
  const auto c = test::sh(kBin + " check --preset odd-a --slots 3 --backend " +
                          test::q(kSlip + ",slip=commit_off_by_one") + " --ops " +
                          test::q("alloc; alloc @1; prefill 3; prefill 2 @1; decode @1,pad; checkpoint; "
                                  "verify 4 @0,pad; commit 1 4"));
  EXPECT_EQ(c.code, 1) << c.out;
  EXPECT_NE(c.out.find("commit restores intermediate n instead of n-1?"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("maps heads tiled"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("each padding row's update"), std::string::npos) << c.out;
}

// The same reruns in `ssmcheck replay` (replay::slip_hints): a trace recorded from the slip plug-in
// with heads mapped tiled, or with a padding row written into slot 0, replays on the reference with
// the slip named, in the text and in the JSON's "convention_hints"; a trace of the plug-in without a
// slip, and one of another slip, on a model where tiling differs with padding rows, get no such hint.
struct TraceSlip {
  const char* slip;  // "" for none
  const char* flags;
  const char* ops;
  const char* hint;  // "" when none may appear
};
// gtest names a case by it (else it prints the struct's raw bytes)
void PrintTo(const TraceSlip& s, std::ostream* os) {
  *os << (*s.slip ? s.slip : "no slip") << " " << s.flags << ": " << s.ops;
}

class ReplayLikelyCause : public ::testing::TestWithParam<TraceSlip> {};

TEST_P(ReplayLikelyCause, ATraceOfThePlantedSlipIsNamed) {
  const TraceSlip& s = GetParam();
  test::TempDir dir;
  const std::string trace = dir.path() + "/t.h5", json = dir.path() + "/v.json";
  const std::string backend = kSlip + (*s.slip ? std::string(",slip=") + s.slip : "");
  const auto rec = test::sh(kBin + " record " + s.flags + " --backend " + test::q(backend) + " --ops " +
                            test::q(s.ops) + " -o " + test::q(trace));
  ASSERT_EQ(rec.code, 0) << rec.out;
  const auto r = test::sh(kBin + " replay " + test::q(trace) + " --json " + test::q(json));
  std::ifstream in(json);
  const nlohmann::json v = nlohmann::json::parse(in);
  ASSERT_TRUE(v.contains("results") && v["results"].size() == 1) << v.dump(2);
  const nlohmann::json& result = v["results"][0];
  if (!*s.hint) {
    EXPECT_EQ(r.code, *s.slip ? 1 : 0) << r.out;  // another slip diverges; the correct trace agrees
    EXPECT_EQ(r.out.find("replaying on the reference that"), std::string::npos) << r.out;
    EXPECT_FALSE(result.contains("convention_hints")) << result.dump(2);
    return;
  }
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(std::string("likely cause: replaying on the reference that ") + s.hint), std::string::npos)
      << "expected a hint saying: " << s.hint << "\n"
      << r.out;
  EXPECT_NE(r.out.find("(its first divergence without it): the trace's producer "), std::string::npos) << r.out;
  // the confirmed cause outranks what the fields resemble (pad_into_slot0 leaves slot 0's conv window
  // one column on, which reads as "the window not shifted"): every likely cause printed is a rerun's
  for (size_t at = r.out.find("likely cause: "); at != std::string::npos; at = r.out.find("likely cause: ", at + 1))
    EXPECT_EQ(r.out.compare(at, 38, "likely cause: replaying on the referen"), 0) << r.out.substr(at, 120);
  ASSERT_TRUE(result.contains("convention_hints")) << result.dump(2);
  ASSERT_EQ(result["convention_hints"].size(), 1u) << result["convention_hints"].dump(2);
  EXPECT_NE(result["convention_hints"][0].get<std::string>().find(s.hint), std::string::npos)
      << result["convention_hints"].dump(2);
}

INSTANTIATE_TEST_SUITE_P(
    Traces, ReplayLikelyCause,
    ::testing::Values(
        TraceSlip{"heads_tiled", "--preset odd-a", "alloc; prefill 3; decode",
                  "maps heads tiled (GDN value head v reads key head v % nk"},
        TraceSlip{"heads_tiled", "--preset mamba-tiny", "alloc; prefill 3",
                  "maps heads tiled (Mamba-2 head h reads group h % ng"},
        TraceSlip{"pad_into_slot0", "--preset tiny --slots 3",
                  "alloc; alloc @1; prefill 3; prefill 2 @1; decode @1,pad",
                  "writes each padding row's update into pool slot 0"},
        TraceSlip{"pad_into_slot0", "--preset mamba-tiny --slots 3", "alloc; alloc @1; prefill 2 @1; verify 3 @1,pad",
                  "writes each padding row's update into pool slot 0"},
        // a correct trace where both reruns would run (tiling differs, padding rows): no divergence, no hint
        TraceSlip{"", "--preset odd-a --slots 3",
                  "alloc; alloc @1; prefill 3; prefill 2 @1; decode @1,pad; checkpoint; verify 4 @0,pad; commit 1 4",
                  ""},
        // another slip there: it diverges, and neither rerun agrees
        TraceSlip{"commit_off_by_one", "--preset odd-a --slots 3",
                  "alloc; alloc @1; prefill 3; prefill 2 @1; decode @1,pad; checkpoint; verify 4 @0,pad; commit 1 4",
                  ""}),
    [](const ::testing::TestParamInfo<TraceSlip>& i) {
      return std::string(*i.param.slip ? i.param.slip : "none") + "_" + std::to_string(i.index);
    });

// Shrinking minimises the configuration too, and the verdict carries the failure as fields: a
// planted commit slip that needs no extreme gate, decay, value scale, padding row, WY arm,
// snapshot or second layer comes back without any, on every seed.
TEST(ShrunkCase, CarriesNoIrrelevantFlagAndItsVerdictIsStructured) {
  for (const int seed : {3, 5, 8}) {
    test::TempDir dir;
    const std::string json = dir.path() + "/v.json";
    const auto r =
        test::sh(kBin + " fuzz --backend " + test::q(kSlip + ",slip=commit_off_by_one") + " --cases 300 --seed " +
                 std::to_string(seed) + " --out " + test::q(dir.path() + "/out") + " --json " + test::q(json));
    ASSERT_EQ(r.code, 1) << "seed " << seed << "\n" << r.out;
    std::ifstream in(json);
    const nlohmann::json v = nlohmann::json::parse(in);
    EXPECT_EQ(v["cases_per_campaign"], 300);
    const nlohmann::json& e = v["cases"][0]["evidence"];
    for (const char* k : {"case", "case_flags", "config", "script", "script_ops", "rerun", "simplified", "divergence"})
      EXPECT_TRUE(e.contains(k)) << k << " missing: " << e.dump(2);
    const nlohmann::json& c = e["config"];
    EXPECT_FALSE(c["extreme_gates"].get<bool>()) << "seed " << seed << ": " << e["case_flags"];
    EXPECT_EQ(c["decay"], 0.5) << "seed " << seed << ": " << e["case_flags"];
    EXPECT_EQ(c["value_scale"], 1.0) << "seed " << seed << ": " << e["case_flags"];
    EXPECT_EQ(c["snapshots"], 0) << "seed " << seed << ": " << e["case_flags"];
    EXPECT_EQ(c["layers"], 1) << "seed " << seed << ": " << e["case_flags"];
    const std::string script = e["script"];
    EXPECT_EQ(script.find("wy"), std::string::npos) << script;
    EXPECT_EQ(script.find("pad"), std::string::npos) << script;
    EXPECT_EQ(e["case_flags"].get<std::string>().find("--extreme-gates"), std::string::npos);
    // the first divergence: op, sequence, layer, tensor and worst elements; and the hint
    const nlohmann::json& d = e["divergence"];
    ASSERT_FALSE(d["failures"].empty()) << d.dump(2);
    const nlohmann::json& f = d["failures"][0];
    for (const char* k : {"op_index", "op", "seq", "layer", "tensor", "worst"}) EXPECT_TRUE(f.contains(k)) << k;
    EXPECT_FALSE(f["worst"].empty());
    ASSERT_FALSE(d["hints"].empty()) << d.dump(2);
    EXPECT_NE(d["hints"][0].get<std::string>().find("commit restores intermediate n instead of n-1?"),
              std::string::npos);
    // the rerun line is a shell command that fails the same way
    const auto again = test::sh(e["rerun"].get<std::string>().replace(0, 8, kBin));
    EXPECT_EQ(again.code, 1) << e["rerun"] << "\n" << again.out;
  }
}

// A failure that does not recur when its minimal case is rerun (a race, state leaking between
// cases) is reported as such, with the campaign's own evidence, and no dump of a rerun that agreed.
TEST(Recurrence, AFailureThatDoesNotRecurIsSaidToBeOne) {
  test::TempDir dir;
  const std::string json = dir.path() + "/v.json", out = dir.path() + "/out";
  const auto r = test::sh(kBin + " fuzz --backend " + test::q(kSlip + ",slip=flaky_commit") +
                          " --cases 300 --seed 3 --out " + test::q(out) + " --json " + test::q(json));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("DID NOT RECUR"), std::string::npos) << r.out;
  std::ifstream in(json);
  const nlohmann::json v = nlohmann::json::parse(in);
  EXPECT_FALSE(v["cases"][0]["evidence"]["recurred"].get<bool>());
  EXPECT_NE(v["cases"][0]["evidence"]["divergence"]["hints"].dump().find("commit restores"), std::string::npos)
      << "the campaign's own failing run is the evidence";
  EXPECT_FALSE(std::filesystem::exists(out) && !std::filesystem::is_empty(out)) << "a rerun that agreed was dumped";
  // the deterministic slip recurs
  const auto d = test::sh(kBin + " fuzz --backend " + test::q(kSlip + ",slip=commit_off_by_one") +
                          " --cases 300 --seed 3 --out " + test::q(out));
  EXPECT_EQ(d.code, 1) << d.out;
  EXPECT_EQ(d.out.find("DID NOT RECUR"), std::string::npos) << d.out;
}

// A bias far inside every tolerance: every other output element one ULP up. No element fails; the
// campaign's sign tally does, naming the field (fuzz/bias.h); the same plug-in without the slip
// is not flagged.
TEST(Bias, OneUlpUpwardIsFlaggedAndACorrectPluginIsNot) {
  test::TempDir dir;
  const std::string json = dir.path() + "/v.json";
  const auto r = test::sh(kBin + " fuzz --backend " + test::q(kSlip + ",slip=output_round_up") +
                          " --cases 200 --seed 17 --out " + test::q(dir.path()) + " --json " + test::q(json));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("BIAS CHECK FAILED: output:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("erred upward"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("minimal failing case"), std::string::npos) << "no element may fail: " << r.out;
  std::ifstream in(json);
  const nlohmann::json v = nlohmann::json::parse(in);
  EXPECT_NE(v["cases"][0]["message"].get<std::string>().find("bias check failed: output"), std::string::npos);
  const auto ok =
      test::sh(kBin + " fuzz --backend " + test::q(kSlip) + " --cases 200 --seed 17 --out " + test::q(dir.path()));
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out.find("BIAS"), std::string::npos) << ok.out;
}

// A --duration campaign names the cases it ran as a campaign of fixed cases, which runs them again.
// A plug-in's perturbed schedule (ssmp_plugin.perturb_schedule, docs/plugins.md) reaches it through
// its host process: a slip that shows only on a perturbed schedule passes plainly and fails under
// perturbed:, and the gate's perturbed campaign finds it; an implementation without the mode is
// named.
TEST(PerturbedSchedule, APluginsModeCrossesItsHostAndTheGateRunsIt) {
  const std::string slip = kSlip + ",slip=perturbed_only", ops = "alloc; prefill 3; verify 4; commit 2 4";
  const auto plain = test::sh(kBin + " check --backend " + test::q(slip) + " --ops " + test::q(ops));
  EXPECT_EQ(plain.code, 0) << plain.out;
  const auto perturbed = test::sh(kBin + " check --backend " + test::q("perturbed:" + slip) + " --ops " + test::q(ops));
  EXPECT_EQ(perturbed.code, 1) << perturbed.out;
  // the check line says which side ran perturbed
  EXPECT_NE(perturbed.out.find(" vs perturbed:"), std::string::npos) << perturbed.out;
  EXPECT_NE(plain.out.find(": agree"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("perturbed:"), std::string::npos) << plain.out;
  test::TempDir dir;
  const std::string json = dir.path() + "/gate.json";
  const auto gate =
      test::sh(kBin + " gate --backend " + test::q(slip) + " --cases 200 --no-coverage --json " + test::q(json));
  EXPECT_EQ(gate.code, 1) << gate.out;
  std::ifstream in(json);
  const nlohmann::json v = nlohmann::json::parse(in);
  std::string plain_campaign, perturbed_campaign;
  for (const auto& c : v["cases"]) {
    const std::string suite = c["suite"];
    if (suite.rfind("campaign.plugin:", 0) == 0) plain_campaign = c["status"];
    if (suite.rfind("campaign.perturbed:plugin:", 0) == 0) perturbed_campaign = c["status"];
  }
  EXPECT_EQ(plain_campaign, "pass") << gate.out;
  EXPECT_EQ(perturbed_campaign, "fail") << gate.out;
  const auto none = test::sh(kBin + " check --backend perturbed:reference --ops alloc");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("reference offers no perturbed schedule"), std::string::npos) << none.out;
}

TEST(Duration, TheCasesThatRanAreReplayable) {
  test::TempDir dir;
  const auto r = test::sh(kBin + " fuzz --backend " + test::q(kSlip) + " --duration 1 --cases 1000000 --seed 9 --out " +
                          test::q(dir.path()));
  EXPECT_EQ(r.code, 0) << r.out;
  const size_t at = r.out.find("the cases that ran, replayable: ssmcheck ");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::string line = r.out.substr(at + std::string("the cases that ran, replayable: ").size());
  line = line.substr(0, line.find('\n'));
  EXPECT_EQ(line.find("--duration"), std::string::npos) << line;
  const size_t ran = r.out.find(" cases (case 0..");
  ASSERT_NE(ran, std::string::npos) << r.out;
  const std::string range = r.out.substr(ran, r.out.find(')', ran) - ran);
  const auto again = test::sh(kBin + line.substr(std::string("ssmcheck").size()));
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find(range), std::string::npos) << "expected" << range << "\n" << again.out;
}

}  // namespace
}  // namespace ssm
