// core/layer_attrs.h: every preset layer round-trips through its attributes by name; bad attributes
// are refused naming them; state_fields names every field with its shape.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/layer_attrs.h"
#include "core/model.h"

namespace ssm {

namespace {
std::string refusal(const std::string& kind, const std::vector<LayerAttr>& attrs) {
  try {
    layer_from_attrs(kind, attrs, "layer 3");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}
bool same_attrs(const std::vector<LayerAttr>& a, const std::vector<LayerAttr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  return true;
}
const std::vector<LayerAttr> kTinyGdn = {{"nk", "1"},
                                         {"nv", "2"},
                                         {"kd", "8"},
                                         {"vd", "12"},
                                         {"d_conv", "4"},
                                         {"conv_bias", "0"},
                                         {"output_gate", "silu"},
                                         {"eps", "1e-06"}};
}  // namespace

TEST(LayerAttrs, EveryPresetLayerRoundTrips) {
  int layers = 0;
  for (const std::string& p : preset_names())
    for (LayerSpec s : make_preset(p).layers) {
      const std::vector<LayerAttr> a = layer_attrs(s);
      const LayerSpec back = layer_from_attrs(to_string(s.kind), a, p);
      EXPECT_TRUE(same_attrs(layer_attrs(back), a)) << p << " " << s.name();
      EXPECT_EQ(back.name(), s.name());
      EXPECT_EQ(back.eps, s.eps) << p;
      EXPECT_EQ(back.dt_min, s.dt_min) << p;
      EXPECT_EQ(back.dt_max, s.dt_max) << p;
      EXPECT_EQ(back.ple, s.ple) << p;
      EXPECT_EQ(back.conv_bias, s.conv_bias) << p;
      EXPECT_EQ(back.norm_before_gate, s.norm_before_gate) << p;
      ++layers;
    }
  EXPECT_GT(layers, 100);
}

TEST(LayerAttrs, ConventionsAndOptionsRoundTrip) {
  LayerSpec s = make_preset("mamba-odd-a").layers[0];
  s.numerics.gates = GateMath::torch;
  s.numerics.f16_store = F16Store::inf;
  s.numerics.f16_rows = F16Rows::carried;
  s.norm_groups = 1;
  s.norm_before_gate = true;
  s.dt_min = 0.001f;
  s.dt_max = 0.1f;
  s.eps = 1.0f / 3.0f;  // needs all 9 digits
  const LayerSpec back = layer_from_attrs("mamba2", layer_attrs(s), "");
  EXPECT_TRUE(back.numerics == s.numerics);
  EXPECT_EQ(back.norm_groups, 1);
  EXPECT_TRUE(back.norm_before_gate);
  EXPECT_EQ(back.dt_min, 0.001f);
  EXPECT_EQ(back.dt_max, 0.1f);
  EXPECT_EQ(back.eps, s.eps);
}

// The required attributes, a GDN layer's output_gate (files always carry it), and no defaults beyond.
TEST(LayerAttrs, WritesOnlyWhatDiffersFromTheDefaults) {
  const std::vector<LayerAttr> a = layer_attrs(make_preset("tiny").layers[0]);
  EXPECT_TRUE(same_attrs(a, kTinyGdn)) << a.size();
}

TEST(LayerAttrs, BadAttributesAreRefusedByName) {
  std::vector<LayerAttr> a = kTinyGdn;
  EXPECT_EQ(refusal("gdm", a).rfind("layer 3: kind: ", 0), 0u) << refusal("gdm", a);
  a.push_back({"gate", "torch"});
  EXPECT_NE(refusal("gdn", a).find("'gate' is not an attribute of a gdn layer"), std::string::npos);
  EXPECT_NE(refusal("gdn", a).find("did you mean gates?"), std::string::npos) << refusal("gdn", a);
  a.back() = {"ng", "2"};
  EXPECT_NE(refusal("gdn", a).find("it is a mamba2 layer's"), std::string::npos) << refusal("gdn", a);
  a.back() = {"nk", "1"};
  EXPECT_NE(refusal("gdn", a).find("'nk' is given twice"), std::string::npos);
  a.back() = {"gates", "tourch"};
  EXPECT_NE(refusal("gdn", a).find("layer 3: gates: "), std::string::npos) << refusal("gdn", a);
  a.back() = {"ple_channels", "8"};
  EXPECT_NE(refusal("gdn", a).find("missing ple_ngram_size, ple_k_size, ple_dilation, ple_eos_id"), std::string::npos)
      << refusal("gdn", a);
  a.pop_back();
  a[4] = {"d_conv", "4x"};
  EXPECT_NE(refusal("gdn", a).find("d_conv: '4x' is not an integer"), std::string::npos) << refusal("gdn", a);
  a[4] = {"d_conv", "9"};
  EXPECT_NE(refusal("gdn", a).find("d_conv must be in 1..8"), std::string::npos) << refusal("gdn", a);
  a.erase(a.begin() + 4);
  EXPECT_NE(refusal("gdn", a).find("'d_conv' is required for a gdn layer"), std::string::npos) << refusal("gdn", a);
  std::vector<LayerAttr> e = kTinyGdn;
  e.back() = {"eps", "nan"};
  EXPECT_NE(refusal("gdn", e).find("eps: 'nan' is not a number"), std::string::npos) << refusal("gdn", e);
}

TEST(LayerAttrs, StateFieldsNameEveryFieldWithItsShape) {
  const LayerSpec g = make_preset("ple-tiny").layers[0];
  ASSERT_TRUE(g.ple.hosted());
  const std::vector<StateField> f = g.state_fields();
  ASSERT_EQ(f.size(), 12u);
  EXPECT_STREQ(f[0].name, "h");
  EXPECT_EQ(f[0].shape, g.h_shape());
  EXPECT_STREQ(f[4].name, "h_intermediate");
  EXPECT_TRUE(f[4].indexed);
  EXPECT_EQ(f[5].shape, (std::vector<int64_t>{g.conv_dim(), g.d_conv}));
  EXPECT_STREQ(f[11].name, "ple_conv_snapshot");
  EXPECT_EQ(f[11].shape, (std::vector<int64_t>{g.ple.conv_rows(), g.ple.channels}));
  const LayerSpec m = make_preset("mamba-tiny").layers[0];
  EXPECT_EQ(m.state_fields().size(), 6u);
  EXPECT_EQ(m.state_fields()[0].shape, (std::vector<int64_t>{m.nh, m.hp, m.ns}));
}

}  // namespace ssm
