// The plug-in ABI by name (SSMP_BY_NAME, plugin/ssmcheck_plugin.h; issue 40 item 6): a plug-in
// written only by name (tests/plugins/by_name_plugin.cpp: the reference underneath, its model from
// ssmp_config.layer_descs) gets, on GDN, Mamba-2, hybrid and PLE presets, hosted and in ssmcheck's
// process, the verdicts the old-ABI reference plug-in gets on the same flags (the same cases, ops,
// refusals and coverage, bitwise against the reference); it passes the gate; its wrong answers (a
// field not present, is_f16 on conv, an output it does not know) are reported naming the field or
// output; a table declaring SSMP_BY_NAME without rows or export_fields is refused at load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/conventions.h"
#include "core/state_digest.h"
#include "core/state_fields.h"
#include "fixtures/generators.h"
#include "fuzz/campaign.h"
#include "plugin/plugin_backend.h"
#include "reference/reference_backend.h"
#include "tests/support/campaign_env.h"
#include "tests/support/shell.h"

namespace ssm {
namespace {

using test::q;
using test::sh;

const std::string kRef = SSMCHECK_REFERENCE_PLUGIN;
const std::string kByName = SSMCHECK_BY_NAME_PLUGIN;

// Every test here goes through field digests (ssmp_plugin.field_digests), which both plug-ins offer:
// by default (auto) they are asked for only on live states of 64 KiB and more, and these presets
// are smaller. Read by each PluginBackend and inherited by every ssmcheck this suite starts.
const bool kDigestsOn = setenv("SSMCHECK_FIELD_DIGESTS", "on", 1) == 0;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// PATH[,options], hosted or in ssmcheck's process (plugin-in-process:)
plugin::PluginSpec spec_of(const std::string& text, bool in_process) {
  plugin::PluginSpec s = plugin::PluginSpec::parse(text);
  s.in_process = in_process;
  return s;
}

// A fuzz verdict without what differs between two runs of the same cases on two backends: the
// timing, the backend's name. Cases, sequences, ops, refusals and coverage stay.
std::string verdict_of(const std::string& path) {
  std::ifstream f(path);
  const nlohmann::json v = nlohmann::json::parse(f);
  std::string s = "pass " + v.at("pass").dump() + ", counts " + v.at("counts").dump() + "\n";
  for (const auto& c : v.at("cases")) {
    s += c.at("status").get<std::string>() + ": " + c.at("message").get<std::string>() + "\n";
    std::istringstream details(c.at("details").get<std::string>());
    std::string line;
    std::getline(details, line);  // "N cases ..., in S s (X ops/s): passed"
    while (std::getline(details, line))
      if (line.rfind("  time:", 0) != 0) s += line + "\n";
  }
  return s;
}

// The by-name plug-in and the old-ABI reference plug-in give the same verdict, hosted and in
// ssmcheck's process, on each kind of layer and on PLE carries.
TEST(PluginByName, CampaignsGiveTheOldAbiReferencePluginsVerdicts) {
  test::TempDir dir("ssmcheck-by-name");
  const uint64_t seed = test::campaign_seed(20261205);
  const std::string cases = std::to_string(test::env_u64("SSMCHECK_CASES", 40));
  for (const std::string preset : {"odd-a", "mamba-odd-a", "hybrid-odd", "ple-odd"}) {
    auto run = [&](const std::string& backend) {
      const std::string json = dir.file("v.json");
      const auto s =
          sh(std::string(SSMCHECK_BIN) + " fuzz --backend " + q(backend) + " --preset " + preset + " --cases " + cases +
             " --seed " + std::to_string(seed) + " --json " + q(json) + " --out " + q(dir.file("out")));
      EXPECT_EQ(s.code, 0) << backend << " on " << preset << ":\n" << s.out;
      return verdict_of(json);
    };
    const std::string old_abi = run("plugin:" + kRef);
    EXPECT_NE(old_abi.find("pass true"), std::string::npos) << old_abi;
    EXPECT_EQ(run("plugin:" + kByName), old_abi) << preset << " hosted";
    EXPECT_EQ(run("plugin-in-process:" + kByName), old_abi) << preset << " in ssmcheck's process";
  }
}

// Over drawn presets, pools and h modes (the campaign of plugin_test's reference plug-in), in
// ssmcheck's process: bitwise, with the coverage of every kind and a carry.
TEST(PluginByName, AgreesBitwiseOverDrawnConfigurations) {
  fuzz::CampaignOptions o;
  o.caps = Capabilities::everything();
  o.caps.async_copies = false;
  o.seed = test::campaign_seed(20261206);
  o.cases = int(test::env_u64("SSMCHECK_CASES", 100));
  o.strictness = cmp::Strictness::bitwise;
  o.backend_label = "plugin-in-process:" + kByName;
  const fuzz::CampaignResult r = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new ref::ReferenceBackend()); },
      [] { return std::unique_ptr<Backend>(new plugin::PluginBackend(spec_of(kByName, true))); });
  std::printf("%s", r.summary().c_str());
  EXPECT_FALSE(r.failed) << r.summary();
  EXPECT_EQ(r.cases, o.cases);
  const auto missing = r.coverage.missing({"h mode f32", "h mode f16", "h mode f16-pool", "rollback to an intermediate",
                                           "layers of several kinds in one model", "layers hosting a PLE carry",
                                           "a partial accept restoring a PLE carry"});
  EXPECT_TRUE(missing.empty()) << "never reached: " << missing.front();
}

TEST(PluginByName, TheGateRunsIt) {
  const auto s = sh(std::string(SSMCHECK_BIN) + " gate --cases 20 --no-coverage --backend " + q("plugin:" + kByName));
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("campaign.plugin:libssmcheck_by_name_plugin"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("replay.golden.plugin:libssmcheck_by_name_plugin"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("skipped"), std::string::npos) << s.out;
  for (const std::string scheme : {"plugin:", "plugin-in-process:"}) {  // its host drives it by name
    const auto list = sh(std::string(SSMCHECK_BIN) + " backends " + q(scheme + kByName));
    EXPECT_EQ(list.code, 0) << list.out;
    // declared() puts it before "runs:" (the test plug-in's own name also holds ", by name")
    EXPECT_NE(list.out.find(", by name, runs: "), std::string::npos) << scheme << ": " << list.out;
  }
}

// A wrong answer is reported naming the field or output, hosted and in ssmcheck's process.
TEST(PluginByName, WrongAnswersAreReportedByName) {
  GenConfig g;
  PoolConfig pool;
  const Model model = make_model(make_preset("ple-odd"), g);
  for (const bool in_process : {false, true}) {
    const char* scheme = in_process ? "in ssmcheck's process" : "hosted";
    auto backend = [&](const std::string& fault) {
      auto b = std::make_unique<plugin::PluginBackend>(spec_of(kByName + ",fault=" + fault, in_process));
      b->create_pool(model, pool);
      return b;
    };
    auto absent = backend("absent_conv");
    const int slot = absent->alloc(0);
    std::string why = error_of([&] { absent->export_state(slot); });
    EXPECT_NE(why.find("export_fields(slot 0): layer 0 field conv: not present"), std::string::npos)
        << scheme << ": " << why;

    auto f16 = backend("f16_conv");
    f16->alloc(0);
    why = error_of([&] { f16->export_state(slot); });
    EXPECT_NE(why.find("layer 0 field conv: is_f16 set, but only h, h_checkpoint and h_intermediate"),
              std::string::npos)
        << scheme << ": " << why;

    auto unknown = backend("unknown_output");
    unknown->alloc(0);
    why = error_of([&] { unknown->prefill(slot, make_inputs(model.spec, g, 0, 0, 0, 2)); });
    EXPECT_NE(why.find("prefill(slot 0, 2 rows) failed"), std::string::npos) << scheme << ": " << why;
    EXPECT_NE(why.find("layer 0: unknown output 'out'"), std::string::npos) << scheme << ": " << why;
  }
}

// The lines of a plug-in's log (by_name_plugin's option log=PATH) that start with `prefix`.
std::vector<std::string> log_lines(const std::string& path, const std::string& prefix) {
  std::ifstream f(path);
  std::vector<std::string> v;
  for (std::string line; std::getline(f, line);)
    if (line.rfind(prefix, 0) == 0) v.push_back(line);
  return v;
}

// With field digests (ssmp_plugin.field_digests) ssmcheck reads back only what changed: after a
// verify and a decode of one of two sequences, the other's digests are unchanged; the decoded one's
// update asks export_fields for h and conv of each layer only (its checkpoint and the verify's
// intermediates are kept), and the updated export equals a whole export bit for bit; hosted (the C
// host answers by name) and in ssmcheck's process.
TEST(PluginByName, FieldDigestsReadBackOnlyWhatChanged) {
  ASSERT_TRUE(kDigestsOn) << "SSMCHECK_FIELD_DIGESTS could not be set";
  GenConfig g;
  PoolConfig pool;
  const Model model = make_model(make_preset("hybrid-odd"), g);
  const size_t layers = model.spec.layers.size();
  for (const bool in_process : {false, true}) {
    const char* scheme = in_process ? "in ssmcheck's process" : "hosted";
    test::TempDir dir;
    const std::string log = dir.file("calls.log");
    plugin::PluginBackend b(spec_of(kByName + ",log=" + log, in_process));
    b.create_pool(model, pool);
    const int s0 = b.alloc(3), s1 = b.alloc(3);
    b.prefill(s0, make_inputs(model.spec, g, 0, 0, 0, 3));
    b.prefill(s1, make_inputs(model.spec, g, 0, 1, 0, 2));
    b.checkpoint(s1, false);
    b.verify({s1}, 3, VerifyArm::exact, {make_inputs(model.spec, g, 1, 1, 0, 3)});
    b.commit(s1, 3, 3);
    const std::optional<FieldDigests> d0 = b.field_digests(s0), d1 = b.field_digests(s1);
    ASSERT_TRUE(d0 && d1) << scheme;
    SequenceState held = b.export_state(s1);
    const size_t whole = log_lines(log, "export_fields").size();

    b.decode({s1}, {make_inputs(model.spec, g, 2, 1, 0, 1)});
    EXPECT_EQ(*b.field_digests(s0), *d0) << scheme << ": a sequence no op touched changed its digests";
    const std::optional<FieldDigests> now = b.field_digests(s1);
    ASSERT_TRUE(now) << scheme;
    size_t changed = 0;
    for (const FieldDigest& f : *now)
      if (f.key.kind != FieldKind::rest && std::find(d1->begin(), d1->end(), f) == d1->end()) ++changed;
    EXPECT_EQ(changed, 2 * layers) << scheme << ": a decode changes h and conv of each layer";
    b.export_update(s1, *d1, *now, held);
    const std::vector<std::string> asked = log_lines(log, "export_fields");
    ASSERT_EQ(asked.size(), whole + 1) << scheme;
    EXPECT_EQ(asked.back(), "export_fields " + std::to_string(2 * layers)) << scheme;
    EXPECT_EQ(state_digest(held), state_digest(b.export_state(s1))) << scheme << ": the update differs from an export";
    EXPECT_TRUE(held.layers[0].h_checkpoint && !held.layers[0].h_intermediates.empty()) << scheme;
  }
}

// A plug-in whose digests lie (fault=hidden_drift: a decode moves another live sequence's exported
// h, its digests stay those of the true state) hides the change from every comparison after an op
// (that sequence's digests and the reference's are unchanged), but not from the end of the case,
// where every sequence is exported whole: `check` fails there, and only there.
TEST(PluginByName, DigestsThatLieAreCaughtAtTheEndOfACase) {
  const auto s = sh(std::string(SSMCHECK_BIN) + " check --preset odd-a --ops " +
                    q("alloc @0; alloc @1; prefill 2 @0; prefill 2 @1; decode @0") + " --backend " +
                    q("plugin:" + kByName + ",fault=hidden_drift"));
  EXPECT_EQ(s.code, 1) << s.out;
  // one failure, at the end: "FAIL op 4 'decode @0 (end of the case)', seq 1 (slot 1), layer 0, h"
  const size_t fail = s.out.find("FAIL op");
  ASSERT_NE(fail, std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("FAIL op", fail + 1), std::string::npos) << "the drift was seen at the op itself: " << s.out;
  EXPECT_NE(s.out.find("(end of the case)', seq 1 (slot 1), layer 0, h ", fail), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("DIFFERENT"), std::string::npos) << s.out;
}

// ssmcheck's side of export_fields (plugin/named_abi.h) on a prepared room: a minimal answer (h and
// conv present) and a full one are read back into the ssmp_state's counts and flags; each answer
// that breaks a rule is refused naming the layer, field and index.
TEST(PluginByName, ExportFieldsReadsAnswersBackAndRefusesWrongOnesByName) {
  GenConfig g;
  const PoolConfig pool;  // capacity 4 on every slot
  const Model model = make_model(make_preset("ple-odd"), g);
  ASSERT_TRUE(model.spec.layers[0].ple.hosted());
  plugin::ExportRoom room(model.spec, pool, {false, false, false, true});
  plugin::ExportFields fields;
  ssmp_state* st = nullptr;
  auto field = [&](const std::string& name, int layer, int index) -> ssmp_field& {
    for (int i = 0; i < fields.size(); ++i) {
      ssmp_field& f = fields.data()[i];
      if (f.name == name && f.layer == layer && f.index == index) return f;
    }
    throw std::runtime_error("no field " + name);
  };
  auto answer = [&](const std::function<void()>& how) {
    st = room.prepare();
    fields.build(model.spec.layers, *st, StateLayout{});
    for (size_t l = 0; l < model.spec.layers.size(); ++l)
      field("h", int(l), 0).present = field("conv", int(l), 0).present = 1;
    how();
    return error_of([&] { fields.apply(*st, 3, "who"); });
  };
  // every field, once per index of its room: 4 intermediates, 5 snapshots on a hosting layer
  EXPECT_EQ(answer([] {}), "(no error)");
  EXPECT_EQ(field("h_intermediate", 0, 3).dims[0], model.spec.layers[0].h_shape()[0]);
  EXPECT_NO_THROW(field("ple_conv_snapshot", 0, 4));
  EXPECT_EQ(st->layers[0].n_h_intermediates, 0);
  EXPECT_EQ(st->last_verify_k, 3);
  EXPECT_EQ(answer([&] {
              for (int t = 0; t < 2; ++t)
                field("h_intermediate", 0, t).present = field("h_intermediate", 0, t).is_f16 = 1;
              field("ple_history", 0, 0).present = field("ple_conv", 0, 0).present = 1;
              field("ple_history_snapshot", 0, 0).present = field("ple_conv_snapshot", 0, 0).present = 1;
            }),
            "(no error)");
  EXPECT_EQ(st->layers[0].n_h_intermediates, 2);
  EXPECT_EQ(st->layers[0].h_intermediates_are_f16, 1);
  EXPECT_EQ(st->ple[0].has_live, 1);
  EXPECT_EQ(st->ple[0].n_snapshots, 1);

  EXPECT_EQ(answer([&] { field("h", 1, 0).present = 0; }),
            "who: layer 1 field h: not present (a slot always holds it)");
  EXPECT_EQ(answer([&] { field("h_intermediate", 0, 1).present = 1; }),
            "who: layer 0 field h_intermediate 1: present, but index 0 is not (they come in order)");
  EXPECT_EQ(answer([&] {
              field("h_intermediate", 0, 0).present = field("h_intermediate", 0, 0).is_f16 = 1;
              field("h_intermediate", 0, 1).present = 1;
            }),
            "who: layer 0 field h_intermediate 1: is_f16 not set, unlike index 0 (a verify's intermediates share one "
            "dtype)");
  EXPECT_EQ(answer([&] { field("ple_history_checkpoint", 0, 0).present = 1; }),
            "who: layer 0 field ple_conv_checkpoint: not present, but layer 0 field ple_history_checkpoint is");
  EXPECT_EQ(answer([&] { field("ple_conv", 0, 0).is_f16 = 1; }),
            "who: layer 0 field ple_conv: is_f16 set, but only h, h_checkpoint and h_intermediate may be FP16 "
            "(binary16 bits)");
  EXPECT_NE(answer([&] {
              field("conv", 0, 0).dims[1] = 1;
            }).find("who: layer 0 field conv: the plug-in changed the field's description"),
            std::string::npos);
}

// A table declaring SSMP_BY_NAME must reach rows and export_fields (struct_size) and set them; the
// positional op members it may leave NULL, but without the flag they stay required.
TEST(PluginByName, ATableWithoutItsByNameMembersIsRefusedAtLoad) {
  const ssmp_plugin& t = *plugin::load_plugin_in_process(kByName).table;
  EXPECT_EQ(t.prefill, nullptr);
  EXPECT_EQ(t.export_state, nullptr);
  static ssmp_plugin short_table = t;
  short_table.struct_size = uint32_t(offsetof(ssmp_plugin, rows));
  std::string why = error_of([&] { plugin::register_plugin("test:by-name-short", &short_table); });
  EXPECT_NE(why.find("declares SSMP_BY_NAME, but its function table (" + std::to_string(short_table.struct_size) +
                     " bytes) ends before rows"),
            std::string::npos)
      << why;
  short_table.struct_size = uint32_t(offsetof(ssmp_plugin, export_fields));
  why = error_of([&] { plugin::register_plugin("test:by-name-shorter", &short_table); });
  EXPECT_NE(why.find("ends before export_fields"), std::string::npos) << why;

  static ssmp_plugin no_export = t;
  no_export.export_fields = nullptr;
  why = error_of([&] { plugin::register_plugin("test:by-name-no-export", &no_export); });
  EXPECT_NE(why.find("required members not set: export_fields (SSMP_BY_NAME)"), std::string::npos) << why;

  static ssmp_plugin positional = t;
  positional.flags &= ~uint32_t(SSMP_BY_NAME);
  why = error_of([&] { plugin::register_plugin("test:by-name-without-flag", &positional); });
  EXPECT_NE(why.find("required members not set: prefill, decode, verify, export_state"), std::string::npos) << why;
}

}  // namespace
}  // namespace ssm
