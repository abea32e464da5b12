// The PLE carry (STATE-MODEL section 7, docs/state-model.md "PLE carry"): the reference against an
// independent oracle written here from the contract, the carry's life through every op, hand-checked
// history rebuilds, bad inputs, dumps, and the comparison of presence.
//
// The oracle keeps, per hosting layer, every row (token and PLE row) the sequence fed the carry
// since it was created, and derives the carry from that list: conv = the last (k_size-1)*dilation
// rows of (zero rows ++ every x), history = the last ngram_size-1 ids of (EOS ids ++ every token).
// A partial accept of n rows is then "the list as it was before the verify, plus its first n rows",
// a different formulation from the reference's snapshots.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "formats/dump.h"
#include "formats/format_error.h"
#include "tests/support/ref_harness.h"

namespace ssm::test {
namespace {

// The rows a hosting layer's carry was fed since it was created; nullopt: absent.
struct OracleRows {
  std::vector<float> tokens;
  std::vector<std::vector<float>> x;  // [rows][C]
};
using OracleCarry = std::optional<OracleRows>;

// The carry an OracleRows list stands for.
PleCarry carry_of(const LayerSpec& s, const OracleRows& r) {
  const PleSpec& p = s.ple;
  PleCarry c = fresh_ple_carry(s);
  const int R = p.conv_rows(), H = p.history_len(), n = int(r.x.size());
  for (int i = 0; i < R; ++i) {
    const int src = n - R + i;  // row i of the state is row src of the fed rows (negative: a zero row)
    for (int ch = 0; ch < p.channels; ++ch) c.conv.f32()[i * p.channels + ch] = src >= 0 ? r.x[size_t(src)][size_t(ch)] : 0.0f;
  }
  for (int i = 0; i < H; ++i) {
    const int src = int(r.tokens.size()) - H + i;
    c.history.f32()[i] = src >= 0 ? r.tokens[size_t(src)] : float(p.eos_id);
  }
  return c;
}

// The output of the last fed row, in FP64: x + silu(sum_j w[c][j] X[(K-1-j)*dilation rows back]).
std::vector<double> last_output(const LayerSpec& s, const LayerWeights& w, const OracleRows& r) {
  const PleSpec& p = s.ple;
  const int n = int(r.x.size());
  std::vector<double> out(size_t(p.channels));
  for (int ch = 0; ch < p.channels; ++ch) {
    double y = 0;
    for (int j = 0; j < p.k_size; ++j) {
      const int row = n - 1 - (p.k_size - 1 - j) * p.dilation;
      y += double(w.ple_w[size_t(ch * p.k_size + j)]) * (row >= 0 ? double(r.x[size_t(row)][size_t(ch)]) : 0.0);
    }
    out[size_t(ch)] = double(r.x[size_t(n - 1)][size_t(ch)]) + y / (1.0 + std::exp(-y));
  }
  return out;
}

// The oracle of one sequence: per layer its carry, the checkpoint's, and the last verify's
// pre-verify list with that verify's rows (a partial accept keeps the first n).
struct OracleSeq {
  std::vector<OracleCarry> live, checkpoint;
  std::vector<OracleRows> before_verify, verify_rows;
  bool has_checkpoint = false;
  int last_k = 0;
  explicit OracleSeq(size_t layers) : live(layers), checkpoint(layers), before_verify(layers), verify_rows(layers) {}
};

class PleOracleRun {
 public:
  PleOracleRun(const std::string& preset, HMode mode, uint64_t seed) : c_(preset, mode, seed, 5, 2) {
    model_ = make_model(c_.spec, c_.gen);
  }

  // Feeds `in` to the oracle's carries of `seq` and checks the reference's PLE outputs row by row.
  void feed(OracleSeq& o, const StepInputs& in, const StepOutputs& out, const std::string& what) {
    for (size_t l = 0; l < c_.spec.layers.size(); ++l) {
      const LayerSpec& s = c_.spec.layers[l];
      if (!s.ple.hosted()) {
        EXPECT_TRUE(out.ple[l].empty()) << what;
        continue;
      }
      if (!o.live[l]) o.live[l] = OracleRows{};  // created on first use
      const size_t C = size_t(s.ple.channels);
      for (int t = 0; t < in.rows; ++t) {
        o.live[l]->tokens.push_back(in.layers[l].ple_tokens[size_t(t)]);
        o.live[l]->x.emplace_back(in.layers[l].ple_x.begin() + long(size_t(t) * C),
                                  in.layers[l].ple_x.begin() + long(size_t(t + 1) * C));
        const std::vector<double> want = last_output(s, model_.weights[l], *o.live[l]);
        for (size_t ch = 0; ch < C; ++ch) {
          const double got = out.ple[l][size_t(t) * C + ch];
          // the reference rounds its FP64 result once: within an FP32 ulp of the oracle's
          ASSERT_NEAR(got, want[ch], 1e-7 * std::max(1.0, std::fabs(want[ch])))
              << what << ": layer " << l << " row " << t << " channel " << ch;
        }
      }
    }
  }

  // The reference's exported carries of a slot against the oracle's, every part bit for bit.
  void check(int slot, const OracleSeq& o, const std::string& what) {
    const SequenceState st = c_.backend->export_state(slot);
    for (size_t l = 0; l < c_.spec.layers.size(); ++l) {
      const LayerSpec& s = c_.spec.layers[l];
      const LayerState& L = st.layers[l];
      const std::string at = what + ": layer " + std::to_string(l);
      auto same = [&](const std::optional<PleCarry>& got, const OracleCarry& want, const std::string& field) {
        ASSERT_EQ(got.has_value(), want.has_value()) << at << " " << field << " presence";
        if (!got) return;
        const PleCarry w = carry_of(s, *want);
        EXPECT_EQ(tensor_diff(got->history, w.history, field + " history"), "") << at;
        EXPECT_EQ(tensor_diff(got->conv, w.conv, field + " conv"), "") << at;
      };
      if (!s.ple.hosted()) {
        EXPECT_FALSE(L.ple || L.ple_checkpoint || !L.ple_snapshots.empty()) << at << ": a carry on a layer hosting none";
        continue;
      }
      same(L.ple, o.live[l], "live");
      same(L.ple_checkpoint, o.has_checkpoint ? o.checkpoint[l] : OracleCarry{}, "checkpoint");
      ASSERT_EQ(L.ple_snapshots.size(), size_t(o.last_k)) << at;
      for (int t = 0; t < o.last_k; ++t) {
        OracleRows r = o.before_verify[l];
        r.tokens.insert(r.tokens.end(), o.verify_rows[l].tokens.begin(), o.verify_rows[l].tokens.begin() + t);
        r.x.insert(r.x.end(), o.verify_rows[l].x.begin(), o.verify_rows[l].x.begin() + t);
        same(L.ple_snapshots[size_t(t)], r, "snapshot " + std::to_string(t));
      }
    }
  }

  // Runs one op of `seq` on the reference and the oracle; returns false when the reference refused it.
  bool op(OracleSeq& o, int& slot, const std::string& text, int step) {
    const Op p = parse_op(text);
    const std::string what = "op '" + text + "' (" + c_.name() + ")";
    try {
      switch (p.kind) {
        case OpKind::alloc:
          slot = c_.backend->alloc(0);
          o = OracleSeq(c_.spec.layers.size());
          break;
        case OpKind::prefill: {
          const StepInputs in = c_.inputs(step, p.prefill_tokens());
          feed(o, in, c_.backend->prefill(slot, in), what);
          break;
        }
        case OpKind::decode: {
          const StepInputs in = c_.inputs(step, 1);
          feed(o, in, c_.backend->decode({slot}, {in})[0], what);
          break;
        }
        case OpKind::verify: {
          const StepInputs in = c_.inputs(step, p.verify_rows());
          const StepOutputs out = c_.backend->verify({slot}, p.verify_rows(), p.arm, {in})[0];
          for (size_t l = 0; l < o.live.size(); ++l) {
            if (!c_.spec.layers[l].ple.hosted()) continue;
            o.before_verify[l] = o.live[l] ? *o.live[l] : OracleRows{};
          }
          feed(o, in, out, what);
          for (size_t l = 0; l < o.live.size(); ++l) {
            if (!c_.spec.layers[l].ple.hosted()) continue;
            const size_t pre = o.before_verify[l].x.size();
            o.verify_rows[l].tokens.assign(o.live[l]->tokens.begin() + long(pre), o.live[l]->tokens.end());
            o.verify_rows[l].x.assign(o.live[l]->x.begin() + long(pre), o.live[l]->x.end());
          }
          o.last_k = p.verify_rows();
          break;
        }
        case OpKind::commit:
        case OpKind::rollback: {
          const bool is_commit = p.kind == OpKind::commit;
          const int n = is_commit ? p.commit_accepted() : p.rollback_n();
          if (is_commit) c_.backend->commit(slot, n, p.commit_verify_rows());
          else c_.backend->rollback(slot, n, false);
          if (is_commit && n == p.commit_verify_rows()) break;
          for (size_t l = 0; l < o.live.size(); ++l) {
            if (!c_.spec.layers[l].ple.hosted()) continue;
            if (n == 0) {
              if (o.has_checkpoint) o.live[l] = o.checkpoint[l];
              continue;
            }
            OracleRows r = o.before_verify[l];  // the pre-verify rows plus the first n of the verify
            r.tokens.insert(r.tokens.end(), o.verify_rows[l].tokens.begin(), o.verify_rows[l].tokens.begin() + n);
            r.x.insert(r.x.end(), o.verify_rows[l].x.begin(), o.verify_rows[l].x.begin() + n);
            o.live[l] = r;
          }
          break;
        }
        case OpKind::checkpoint:
          c_.backend->checkpoint(slot, false);
          o.checkpoint = o.live;
          o.has_checkpoint = true;
          break;
        case OpKind::snapshot_save:
          c_.backend->snapshot_save(slot, p.snapshot_index());
          saved_[p.snapshot_index()] = o.live;
          break;
        case OpKind::snapshot_restore:
          c_.backend->snapshot_restore(slot, p.snapshot_index());
          o.live = saved_.at(p.snapshot_index());
          break;
        default:
          ADD_FAILURE() << "the oracle does not model " << text;
      }
    } catch (const StateError&) {
      return false;
    }
    check(slot, o, what);
    return true;
  }

  RefCase c_;
  Model model_;
  std::map<int, std::vector<OracleCarry>> saved_;
};

void c_release(PleOracleRun& run, int slot) { run.c_.backend->release(slot); }

using OracleParam = std::tuple<std::string, HMode>;
class PleOracle : public ::testing::TestWithParam<OracleParam> {};

// Every op that moves the carry, on both PLE presets, with FP32 h and FP16 h from allocation (the
// carry is FP32 whatever h is; f16 mode's conversions would refuse some of these restores): an absent carry checkpointed and restored, snapshots of an absent carry, partial accepts
// by commit and rollback at every position, release and re-alloc.
TEST_P(PleOracle, ReferenceFollowsTheContract) {
  const auto& [preset, mode] = GetParam();
  PleOracleRun run(preset, mode, 31);
  OracleSeq o(run.c_.spec.layers.size());
  int slot = -1;
  const std::vector<std::string> script = {
      "alloc", "checkpoint", "snapshot_save 1", "prefill 3", "rollback 0", "decode", "snapshot_restore 1",
      "prefill 4", "checkpoint", "verify 5", "commit 1 5", "verify 5", "commit 2 5", "verify 5", "rollback 3",
      "verify 5", "rollback 4", "decode", "verify 4", "commit 4 4", "snapshot_save 0", "verify 3", "commit 2 3",
      "rollback 0", "snapshot_restore 0", "verify 2", "rollback 1", "decode", "alloc", "decode", "verify 3",
      "commit 1 3"};
  int accepted = 0;
  for (size_t i = 0; i < script.size(); ++i) {
    if (script[i] == "alloc" && slot >= 0) c_release(run, slot);
    accepted += run.op(o, slot, script[i], int(i)) ? 1 : 0;
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(accepted, int(script.size())) << "every op of the script is legal in these h modes";
}

INSTANTIATE_TEST_SUITE_P(Presets, PleOracle,
                         ::testing::Combine(::testing::Values("ple-tiny", "ple-odd"),
                                            ::testing::Values(HMode::f32, HMode::f16_pool)),
                         [](const ::testing::TestParamInfo<OracleParam>& i) {
                           std::string n = std::get<0>(i.param) + "_" + to_string(std::get<1>(i.param));
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// ---------------------------------------------------------------------------------------------
// Hand-checked histories (ple-tiny: ngram_size 3, so two ids; EOS 2)
// ---------------------------------------------------------------------------------------------

StepInputs with_tokens(const RefCase& c, int step, std::vector<float> tokens) {
  StepInputs in = c.inputs(step, int(tokens.size()));
  in.layers[0].ple_tokens = std::move(tokens);
  return in;
}

std::vector<float> history(ref::ReferenceBackend& b, int slot) {
  const SequenceState s = b.export_state(slot);
  if (!s.layers[0].ple) return {};
  const Tensor& h = s.layers[0].ple->history;
  return std::vector<float>(h.f32(), h.f32() + h.size());
}

TEST(PleHistory, PartialAcceptsRebuildFromThePreVerifyHistory) {
  RefCase c("ple-tiny", HMode::f32, 5, 5, 2);
  ref::ReferenceBackend& b = *c.backend;
  const int s = b.alloc(0);
  EXPECT_TRUE(history(b, s).empty()) << "absent until the first row";
  b.prefill(s, with_tokens(c, 0, {10}));
  EXPECT_EQ(history(b, s), (std::vector<float>{2, 10})) << "EOS-filled at creation";
  b.prefill(s, with_tokens(c, 1, {11}));
  b.verify({s}, 4, VerifyArm::exact, {with_tokens(c, 2, {20, 21, 22, 23})});
  EXPECT_EQ(history(b, s), (std::vector<float>{22, 23}));
  b.commit(s, 1, 4);
  EXPECT_EQ(history(b, s), (std::vector<float>{11, 20})) << "rebuilt: 10 11 + 20, not 22 23 truncated";
  b.verify({s}, 3, VerifyArm::exact, {with_tokens(c, 3, {30, 31, 32})});
  const SequenceState st = b.export_state(s);
  ASSERT_EQ(st.layers[0].ple_snapshots.size(), 3u);
  const std::vector<std::vector<float>> want = {{11, 20}, {20, 30}, {30, 31}};
  for (size_t t = 0; t < 3; ++t) {
    const Tensor& h = st.layers[0].ple_snapshots[t].history;
    EXPECT_EQ(std::vector<float>(h.f32(), h.f32() + h.size()), want[t]) << "snapshot " << t << " (after t kept rows)";
  }
  EXPECT_FALSE(st.layers[1].ple) << "layer 1 hosts no carry";
  b.rollback(s, 2, false);
  EXPECT_EQ(history(b, s), (std::vector<float>{30, 31}));
}

TEST(PleHistory, AnAbsentCarryIsCheckpointedAndRestoredAsAbsent) {
  RefCase c("ple-tiny", HMode::f32, 5, 5, 2);
  ref::ReferenceBackend& b = *c.backend;
  const int s = b.alloc(0);
  b.checkpoint(s, false);
  b.snapshot_save(s, 0);
  b.decode({s}, {with_tokens(c, 0, {7})});
  EXPECT_EQ(history(b, s), (std::vector<float>{2, 7}));
  b.rollback(s, 0, false);
  EXPECT_TRUE(history(b, s).empty()) << "rollback 0 restores the checkpoint's absent carry";
  b.decode({s}, {with_tokens(c, 1, {8})});
  EXPECT_EQ(history(b, s), (std::vector<float>{2, 8})) << "created afresh";
  b.snapshot_restore(s, 0);
  EXPECT_TRUE(history(b, s).empty()) << "the snapshot's carry was absent too";
  b.release(s);
  const int s2 = b.alloc(0);
  EXPECT_TRUE(history(b, s2).empty()) << "alloc: absent";
}

// The conv state's rows with dilation: ple-odd's layer 2 (k_size 2, dilation 5: y = w0 x[t-5] + w1 x[t]).
TEST(PleConv, TheDilatedTapReadsTheRowDilationBack) {
  RefCase c("ple-odd", HMode::f32, 9, 5, 2);
  ref::ReferenceBackend& b = *c.backend;
  const int s = b.alloc(0);
  const StepInputs in = c.inputs(0, 7);
  const StepOutputs out = b.prefill(s, in);
  const LayerSpec& ls = c.spec.layers[2];
  ASSERT_EQ(ls.ple.k_size, 2);
  ASSERT_EQ(ls.ple.dilation, 5);
  const Model model = make_model(c.spec, c.gen);
  const LayerWeights& w = model.weights[2];
  const int C = ls.ple.channels;
  for (int t = 0; t < 7; ++t)
    for (int ch = 0; ch < C; ++ch) {
      const double back = t >= 5 ? in.layers[2].ple_x[size_t((t - 5) * C + ch)] : 0.0;
      const double x = in.layers[2].ple_x[size_t(t * C + ch)];
      const double y = double(w.ple_w[size_t(ch * 2)]) * back + double(w.ple_w[size_t(ch * 2 + 1)]) * x;
      EXPECT_EQ(out.ple[2][size_t(t * C + ch)], float(x + y / (1 + std::exp(-y)))) << "row " << t << " channel " << ch;
    }
  const SequenceState st = b.export_state(s);
  const Tensor& conv = st.layers[2].ple->conv;  // the last 5 rows, oldest first
  ASSERT_EQ(conv.shape(), (std::vector<int64_t>{5, C}));
  for (int i = 0; i < 5; ++i)
    for (int ch = 0; ch < C; ++ch) EXPECT_EQ(conv.f32()[i * C + ch], in.layers[2].ple_x[size_t((i + 2) * C + ch)]);
}

// ---------------------------------------------------------------------------------------------
// Bad input, the model, dumps, compare
// ---------------------------------------------------------------------------------------------

TEST(PleInputs, TokenIdsMustBeIntegersInRange) {
  const ModelSpec spec = make_preset("ple-tiny");
  GenConfig g;
  for (const float bad : {3.5f, -1.0f, 16777216.0f}) {
    StepInputs in = make_inputs(spec, g, 0, 0, 0, 3);
    in.layers[0].ple_tokens[1] = bad;
    try {
      in.validate(spec, 3);
      ADD_FAILURE() << "token " << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("layer 0 ple_tokens: row 1"), std::string::npos) << what;
      EXPECT_NE(what.find("not a token id"), std::string::npos) << what;
    }
  }
  StepInputs in = make_inputs(spec, g, 0, 0, 0, 3);
  in.layers[1].ple_x = {1.0f};  // layer 1 hosts none
  EXPECT_THROW(in.validate(spec, 3), std::invalid_argument);
  // a row has one token: the same on every hosting layer (ple-odd: layers 0 and 2)
  const ModelSpec odd = make_preset("ple-odd");
  StepInputs two = make_inputs(odd, g, 0, 0, 0, 4);
  EXPECT_NO_THROW(two.validate(odd, 4)) << "the generators draw one token per row";
  two.layers[2].ple_tokens[3] += 1.0f;
  try {
    two.validate(odd, 4);
    ADD_FAILURE() << "different tokens on two hosting layers accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2 ple_tokens: row 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the same on every layer"), std::string::npos) << e.what();
  }
}

TEST(PleModel, OnlyGdnLayersHostACarryAndTheGeometryIsChecked) {
  ModelSpec m = make_preset("mamba-tiny");
  m.layers[0].ple.channels = 4;
  try {
    m.layers[0].validate();
    ADD_FAILURE() << "a Mamba-2 layer hosting a carry was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("only GDN layers host a PLE carry"), std::string::npos) << e.what();
  }
  LayerSpec s = make_preset("ple-tiny").layers[0];
  s.ple.ngram_size = 1;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = make_preset("ple-tiny").layers[0];
  s.ple.eos_id = kMaxTokenId + 1;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  EXPECT_NE(make_preset("ple-tiny").layers[0].name().find("ple=8x4/3,ngram=3,eos=2"), std::string::npos);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ssmcheck_ple_" + name)).string();
}

TEST(PleDump, RoundTripsEveryPartAndRefusesACarryOnALayerHostingNone) {
  RefCase c("ple-odd", HMode::f16_pool, 3, 5, 2);
  ref::ReferenceBackend& b = *c.backend;
  const int s = b.alloc(0);
  b.prefill(s, c.inputs(0, 3));
  b.checkpoint(s, false);
  b.verify({s}, 4, VerifyArm::exact, {c.inputs(1, 4)});
  b.commit(s, 2, 4);
  formats::Dump d;
  d.spec = c.spec;
  d.pool = c.pool;
  d.sequences.push_back({0, b.export_state(s)});
  const std::string path = temp_path("roundtrip.h5");
  formats::write_dump(path, d);
  const formats::Dump back = formats::read_dump(path);
  ASSERT_EQ(back.spec.layers[0].ple, c.spec.layers[0].ple) << "the geometry travels as model attributes";
  EXPECT_FALSE(back.spec.layers[1].ple.hosted());
  const cmp::StateReport r = cmp::compare_state(d.sequences[0].state, back.sequences[0].state,
                                                cmp::Tolerances::defaults(), cmp::Where{}, cmp::Strictness::bitwise);
  EXPECT_TRUE(r.pass()) << r.text();
  const LayerState& L = back.sequences[0].state.layers[0];
  EXPECT_TRUE(L.ple && L.ple_checkpoint);
  EXPECT_EQ(L.ple_snapshots.size(), 4u);

  formats::Dump bad = d;
  bad.sequences[0].state.layers[1].ple = bad.sequences[0].state.layers[0].ple;
  try {
    formats::write_dump(temp_path("bad.h5"), bad);
    ADD_FAILURE() << "a carry on a layer hosting none was written";
  } catch (const formats::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("/seq0/layer1/ple_history"), std::string::npos) << e.what();
  }
  bad = d;
  bad.sequences[0].state.layers[0].ple_snapshots.pop_back();
  EXPECT_THROW(formats::write_dump(temp_path("bad.h5"), bad), formats::FormatError);
  bad = d;
  bad.sequences[0].state.layers[0].ple->history.f32()[0] = 0.5f;
  try {
    formats::write_dump(temp_path("bad.h5"), bad);
    ADD_FAILURE() << "a history holding 0.5 was written";
  } catch (const formats::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("not a token id"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(PleCompare, PresenceIsPartOfTheState) {
  RefCase c("ple-tiny", HMode::f32, 3, 5, 2);
  const int s = c.backend->alloc(0);
  c.backend->decode({s}, {c.inputs(0, 1)});
  const SequenceState a = c.backend->export_state(s);
  SequenceState b = a;
  b.layers[0].ple.reset();
  const cmp::StateReport r = cmp::compare_state(a, b, cmp::Tolerances::defaults(), cmp::Where{});
  ASSERT_FALSE(r.pass());
  EXPECT_NE(r.text().find("ple present in"), std::string::npos) << r.text();
  b = a;
  b.layers[0].ple->history.f32()[1] += 1.0f;
  const cmp::StateReport r2 = cmp::compare_state(a, b, cmp::Tolerances::defaults(), cmp::Where{});
  ASSERT_FALSE(r2.pass());
  EXPECT_NE(r2.text().find("ple_history"), std::string::npos) << r2.text();
}

}  // namespace
}  // namespace ssm::test
