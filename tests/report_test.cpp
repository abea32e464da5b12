// The HTML report's library (report/, docs/report.md): the error-over-tolerance ratio the colours
// and curves come from, the margins of every compared tensor, the grid's aggregation and its first
// divergence, the page's safety for arbitrary text, and the benchmark section's input checks. The
// drawing itself is checked in a real browser (tests/report_browser_test.py).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compare/compare.h"
#include "reference/reference_backend.h"
#include "replay/replay.h"
#include "report/divergence_grid.h"
#include "report/html_page.h"
#include "report/sections.h"

namespace ssm::report {
namespace {

Tensor f32(std::vector<float> v) {
  Tensor t = Tensor::zeros(DType::f32, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.f32()[i] = v[i];
  return t;
}

cmp::Where where(int op, int layer, const std::string& tensor) {
  cmp::Where w;
  w.op_index = op;
  w.layer = layer;
  w.tensor = tensor;
  return w;
}

// |d| over atol + rtol |ref| for the output class, element by element, and nrmse over max_nrmse.
TEST(ErrorRatio, IsTheWorstMeasureOverItsLimit) {
  cmp::Tolerances tol = cmp::Tolerances::defaults();
  tol.output = cmp::Tolerance{1e-3, 0, 0, 1.0};  // atol only; nrmse limit far away
  const cmp::TensorReport half = cmp::compare_tensor(f32({1, 2, 4}), f32({1, 2.0005f, 4}), cmp::TolClass::output,
                                                     tol, where(0, 0, "output"));
  EXPECT_TRUE(half.pass);
  EXPECT_NEAR(half.error_ratio, 0.5, 1e-3);  // 5e-4 of 1e-3 (FP32 rounding of 2.0005)
  const cmp::TensorReport twice = cmp::compare_tensor(f32({1, 2, 4}), f32({1, 2.002f, 4}), cmp::TolClass::output,
                                                      tol, where(0, 0, "output"));
  EXPECT_FALSE(twice.pass);
  EXPECT_NEAR(twice.error_ratio, 2.0, 1e-3);
  // the whole-tensor guard: nrmse over max_nrmse when it is the worse
  tol.output = cmp::Tolerance{1.0, 0, 0, 1e-4};
  const cmp::TensorReport rms = cmp::compare_tensor(f32({1, 1, 1, 1}), f32({1.001f, 1.001f, 1.001f, 1.001f}),
                                                    cmp::TolClass::output, tol, where(0, 0, "output"));
  EXPECT_FALSE(rms.pass);
  EXPECT_NEAR(rms.error_ratio, 10.0, 1e-2);  // nrmse 1e-3 over 1e-4; |d| is 1e-3 of atol 1
}

TEST(ErrorRatio, ExactIsZeroOrInfinite) {
  const cmp::Tolerances tol = cmp::Tolerances::defaults();
  EXPECT_EQ(cmp::compare_tensor(f32({1, 2}), f32({1, 2}), cmp::TolClass::exact, tol, where(0, 0, "conv")).error_ratio, 0);
  const cmp::TensorReport r = cmp::compare_tensor(f32({1, 2}), f32({1, 2.0000002f}), cmp::TolClass::exact, tol,
                                                  where(0, 0, "conv"));
  EXPECT_FALSE(r.pass);
  EXPECT_TRUE(std::isinf(r.error_ratio));
  // nothing measured (a NaN on one side): beyond any tolerance
  const cmp::TensorReport nan = cmp::compare_tensor(f32({1, 2}), f32({1, NAN}), cmp::TolClass::output, tol,
                                                    where(0, 0, "output"));
  EXPECT_TRUE(std::isinf(nan.error_ratio));
}

// Every compared tensor leaves a margin, passing or not; failures carry their report.
TEST(Margins, EveryTensorOfAStateComparison) {
  ref::ReferenceBackend b;
  const ModelSpec spec = make_preset("odd-a");
  GenConfig gen;
  gen.seed = 4;
  PoolConfig pool;
  pool.max_slots = 1;
  b.create_pool(make_model(spec, gen), pool);
  const int slot = b.alloc(0);
  const SequenceState s = b.export_state(slot);
  SequenceState t = s;
  t.layers[1].h.f32()[3] += 1.0f;
  const cmp::StateReport rep = cmp::compare_state(s, t, cmp::Tolerances::defaults(), where(2, -1, ""));
  ASSERT_EQ(int64_t(rep.margins.size()), rep.tensors);  // no flag differs: one margin per tensor
  ASSERT_EQ(rep.failures.size(), 1u);
  int failed = 0;
  for (const cmp::TensorMargin& m : rep.margins) {
    if (m.pass) {
      EXPECT_EQ(m.error_ratio, 0) << m.summary();  // fresh state: zero on both sides
      EXPECT_TRUE(m.report.empty());
    } else {
      ++failed;
      EXPECT_EQ(m.where.layer, 1);
      EXPECT_EQ(m.where.tensor, "h");
      EXPECT_TRUE(std::isinf(m.error_ratio));  // zero reference, non-zero got
      EXPECT_NE(m.report.find("FAIL"), std::string::npos);
    }
  }
  EXPECT_EQ(failed, 1);
}

cmp::TensorMargin margin(int op, int layer, const std::string& tensor, double ratio, bool pass) {
  cmp::TensorMargin m;
  m.where = where(op, layer, tensor);
  m.error_ratio = ratio;
  m.pass = pass;
  m.report = pass ? "" : "FAIL " + tensor;
  return m;
}

TEST(DivergenceGrid, FoldsIntermediatesKeepsTheWorstAndMarksTheFirst) {
  DivergenceGrid g;
  g.columns = {"0 alloc", "1 verify 3"};
  g.add(1, margin(1, 0, "h_intermediate[0]", 0.25, true));
  g.add(1, margin(1, 0, "h_intermediate[1]", 3.0, false));
  g.add(1, margin(1, 0, "h", 0.5, true));
  g.add(0, margin(0, 1, "h", 0, true));
  g.add(0, margin(0, 0, "h", 0, true));
  g.mark_first(1, 0, "h_intermediate", "op 1 'verify 3', layer 0, h_intermediate[1]");
  const nlohmann::json j = g.divergence_map();
  // rows: layer 0 in order of appearance, then layer 1
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["field"], "h_intermediate");
  EXPECT_EQ(j["rows"][1]["field"], "h");
  EXPECT_EQ(j["rows"][2]["layer"], 1);
  ASSERT_EQ(j["cells"].size(), 4u);  // the two intermediates share one cell
  bool found = false;
  for (const auto& c : j["cells"])
    if (c[0] == 1 && c[1] == 0) {
      found = true;
      EXPECT_EQ(c[2], 3.0);
      EXPECT_EQ(c[3], false);
      EXPECT_NE(j["details"][c[4].get<size_t>()].get<std::string>().find("FAIL h_intermediate[1]"), std::string::npos);
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["first"]["column"], 1);
  EXPECT_EQ(j["first"]["row"], 0);
  // a first divergence without a compared tensor (a refusal) gets a cell of its own
  DivergenceGrid r;
  r.columns = {"0 alloc", "1 commit 0 3"};
  r.mark_first(1, -1, "refusal", "op 1 'commit 0 3' (refusal)");
  const nlohmann::json jr = r.divergence_map();
  ASSERT_EQ(jr["cells"].size(), 1u);
  EXPECT_EQ(jr["cells"][0][2], "inf");
  EXPECT_EQ(jr["rows"][0]["label"], "refusal");
  // error growth: per field the worst over layers, null where nothing was compared
  const nlohmann::json eg = g.error_growth();
  ASSERT_EQ(eg["series"].size(), 2u);
  EXPECT_EQ(eg["series"][0]["field"], "h_intermediate");
  EXPECT_TRUE(eg["series"][0]["ratios"][0].is_null());
  EXPECT_EQ(eg["series"][1]["ratios"][1], 0.5);
}

// A deliberately faulty trace: the grid's first divergence is the replay's.
TEST(DivergenceGrid, OfAReplayPutsTheFirstDivergenceWhereTheReplaySays) {
  for (const char* name : {"zero_h_intermediate.h5", "missing_refusal.h5"}) {
    const formats::Trace t = formats::read_trace(std::string(SSMCHECK_FIXTURES_DIR) + "/traces/faulty/" + name);
    ref::ReferenceBackend b;
    const replay::ReplayResult r = replay::replay_trace(t, b);
    ASSERT_FALSE(r.pass()) << name;
    const DivergenceGrid g = grid_of(t, r);
    const replay::Divergence& d = r.divergences.front();
    EXPECT_EQ(g.first_column, d.op_index) << name;
    EXPECT_EQ(g.first_layer, d.layer) << name;
    EXPECT_EQ(g.first_field, d.tensor.empty() ? d.what : field_of(d.tensor)) << name;
    EXPECT_EQ(g.columns.size(), t.ops.size());
    EXPECT_FALSE(g.note.empty()) << name;  // it stopped there
    const nlohmann::json j = g.divergence_map();
    const auto& row = j["rows"][j["first"]["row"].get<size_t>()];
    EXPECT_EQ(row["layer"], d.layer);
  }
}

TEST(HtmlPage, TextCannotEndTheDataScript) {
  Page p;
  p.title = "a <b> & \"c\"";
  p.add(text_section("evil", "</script><script>alert(1)</script>\xff\xfe bytes"));
  const std::string html = p.html();
  size_t n = 0;
  for (size_t at = html.find("</script>"); at != std::string::npos; at = html.find("</script>", at + 1)) ++n;
  EXPECT_EQ(n, 2u);  // the data's and the drawing script's closing tags, no other
  EXPECT_NE(html.find("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"), std::string::npos);
  // the data holds no markup at all: every < > & of a string is a \u escape (formats/verdict_text.h)
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  EXPECT_EQ(ratio_json(INFINITY), "inf");
  EXPECT_EQ(ratio_json(0.5), 0.5);
}

TEST(BandwidthSection, NamesWhatIsWrong) {
  const nlohmann::json ok = nlohmann::json::parse(R"({"device": "H200", "model": "m", "copy_gbs": 4000,
    "rows": [{"op": "decode", "h": "f32", "batch": 1, "time_us": 10, "gbs": 100},
             {"op": "decode", "h": "f32", "batch": 2, "time_us": 10, "gbs": 200},
             {"op": "decode", "h": "f16", "batch": 1, "time_us": 8, "gbs": 90}]})");
  const nlohmann::json s = bandwidth_section(ok, "b.json");
  ASSERT_EQ(s["series"].size(), 2u);
  EXPECT_EQ(s["series"][0]["name"], "decode (f32)");
  EXPECT_EQ(s["series"][0]["points"].size(), 2u);
  EXPECT_EQ(s["ceiling_gbs"], 4000);
  auto message = [](nlohmann::json j) {
    try {
      bandwidth_section(j, "b.json");
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json no_copy = ok;
  no_copy.erase("copy_gbs");
  EXPECT_EQ(message(no_copy), "b.json: missing field 'copy_gbs'");
  nlohmann::json bad_batch = ok;
  bad_batch["rows"][1]["batch"] = "two";
  EXPECT_EQ(message(bad_batch), "b.json: rows[1]: field 'batch' is not a number");
  nlohmann::json zero_time = ok;
  zero_time["rows"][2]["time_us"] = 0;
  EXPECT_NE(message(zero_time).find("rows[2]: batch 1, GB/s 90, time 0 us: impossible values"), std::string::npos);
  nlohmann::json empty = ok;
  empty["rows"] = nlohmann::json::array();
  EXPECT_EQ(message(empty), "b.json: no rows: nothing to draw");
  EXPECT_EQ(message(nlohmann::json::array()), "b.json: missing field 'copy_gbs'");
}

}  // namespace
}  // namespace ssm::report
