// Model shapes from Hugging Face config.json files (fixtures/hf_config.h): the shipped real
// configs give the presets' shapes, the Mamba-2 one its published geometry, and malformed or
// impossible configs are refused naming the file and the field.
#include <gtest/gtest.h>

#include <cmath>

#include <fstream>

#include "fixtures/hf_config.h"
#include "support/shell.h"

namespace ssm {
namespace {

std::string config(const std::string& name) { return std::string(SSMCHECK_FIXTURES_DIR) + "/configs/" + name; }

bool same_layers(const ModelSpec& a, const ModelSpec& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (size_t i = 0; i < a.layers.size(); ++i)
    if (a.layers[i].name() != b.layers[i].name() || a.layers[i].eps != b.layers[i].eps) return false;
  return true;
}

TEST(hf_config, qwen3_next_config_gives_the_preset) {
  const ModelSpec m = model_from_hf_config(config("qwen3-next-80b-a3b-instruct.json"));
  const ModelSpec p = make_preset("qwen3-next-80b");
  EXPECT_EQ(m.layers.size(), 36u) << "48 layers, every 4th full attention";
  EXPECT_TRUE(same_layers(m, p)) << m.layers[0].name() << " vs " << p.layers[0].name();
  EXPECT_EQ(m.name, "qwen3_next");
  EXPECT_EQ(m.source, "config.json " + config("qwen3-next-80b-a3b-instruct.json"));
  EXPECT_EQ(model_from_hf_config(config("qwen3-next-80b-a3b-instruct.json"), 2).layers.size(), 2u);
}

TEST(hf_config, nemotron_h_config_gives_its_mamba2_geometry_and_equals_its_preset) {
  const ModelSpec m = model_from_hf_config(config("nemotron-h-8b-base-8k.json"));
  ASSERT_EQ(m.layers.size(), 24u) << "24 'M' of 52 layers";
  const LayerSpec& s = m.layers[0];
  EXPECT_EQ(s.kind, LayerKind::mamba2);
  EXPECT_EQ(s.nh, 128);
  EXPECT_EQ(s.hp, 64);
  EXPECT_EQ(s.ns, 128);
  EXPECT_EQ(s.ng, 8);
  EXPECT_EQ(s.d_conv, 4);
  EXPECT_TRUE(s.conv_bias) << "use_conv_bias";
  EXPECT_FLOAT_EQ(s.eps, 1e-5f) << "layer_norm_epsilon";
  // in_proj width: z and x (2 nh hp), B and C (2 ng ns), dt (nh): the published 18560
  EXPECT_EQ(2 * s.nh * s.hp + 2 * s.ng * s.ns + s.nh, 18560);
  EXPECT_EQ(s.conv_dim(), 10240);
  const ModelSpec p = make_preset("nemotron-h-8b");
  EXPECT_TRUE(same_layers(m, p)) << s.name() << " vs " << p.layers[0].name();
}

// time_step_limit, use_conv_bias and norm_before_gate reach the layer; bad values are named.
TEST(hf_config, mamba2_options) {
  test::TempDir dir;
  const std::string base = R"({"num_hidden_layers": 2, "hybrid_override_pattern": "M*", "mamba_num_heads": 8,
    "mamba_head_dim": 4, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4)";
  auto load = [&](const std::string& extra) {
    const std::string p = dir.file("c.json");
    std::ofstream(p) << base << extra << "}";
    return model_from_hf_config(p);
  };
  const LayerSpec s = load(R"(, "time_step_limit": [0.001, 0.1], "use_conv_bias": false, "norm_before_gate": true)").layers.at(0);
  EXPECT_FLOAT_EQ(s.dt_min, 0.001f);
  EXPECT_FLOAT_EQ(s.dt_max, 0.1f);
  EXPECT_FALSE(s.conv_bias);
  EXPECT_TRUE(s.norm_before_gate);
  const LayerSpec d = load("").layers.at(0);
  EXPECT_EQ(d.dt_min, 0.0f);
  EXPECT_TRUE(std::isinf(d.dt_max));
  EXPECT_TRUE(d.conv_bias);
  for (const char* bad : {R"(, "time_step_limit": [0.1, 0.01])", R"(, "time_step_limit": 3)", R"(, "use_conv_bias": 1)"}) {
    try {
      load(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      const std::string field = std::string(bad).find("time_step") != std::string::npos ? "time_step_limit" : "use_conv_bias";
      EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
    }
  }
}

// Falcon-H1's option names: mamba_conv_bias, mamba_norm_before_gate (its default true), and
// mamba_rms_norm false (no output norm), which no layer spec expresses: refused naming it.
TEST(hf_config, falcon_h1_options) {
  test::TempDir dir;
  const std::string base = R"({"model_type": "falcon_h1", "num_hidden_layers": 2, "mamba_n_heads": 8,
    "mamba_d_head": 4, "mamba_d_state": 16, "mamba_n_groups": 2, "mamba_d_conv": 4)";
  auto load = [&](const std::string& extra) {
    const std::string p = dir.file("falcon.json");
    std::ofstream(p) << base << extra << "}";
    return model_from_hf_config(p);
  };
  const ModelSpec d = load("");
  ASSERT_EQ(d.layers.size(), 2u) << "an SSM in every block";
  EXPECT_TRUE(d.layers[0].norm_before_gate) << "mamba_norm_before_gate defaults to true in Falcon-H1";
  EXPECT_TRUE(d.layers[0].conv_bias);
  const LayerSpec s =
      load(R"(, "mamba_conv_bias": false, "mamba_norm_before_gate": false, "mamba_rms_norm": true)").layers[0];
  EXPECT_FALSE(s.conv_bias);
  EXPECT_FALSE(s.norm_before_gate);
  for (const auto& [bad, expect] :
       {std::pair{R"(, "mamba_rms_norm": false)", "'mamba_rms_norm' is false (the Mamba-2 output is not normalised)"},
        std::pair{R"(, "mamba_conv_bias": "yes")", "'mamba_conv_bias' is \"yes\", expected true or false"},
        std::pair{R"(, "mamba_norm_before_gate": 0)", "'mamba_norm_before_gate' is 0, expected true or false"}}) {
    try {
      load(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
  // another model_type (Granite-4.0-H) keeps the default: the norm after the gate
  const std::string p = dir.file("granite.json");
  std::ofstream(p) << R"({"model_type": "granitemoehybrid", "num_hidden_layers": 1, "layer_types": ["mamba"],
    "mamba_n_heads": 8, "mamba_d_head": 4, "mamba_d_state": 16, "mamba_n_groups": 2, "mamba_d_conv": 4})";
  EXPECT_FALSE(model_from_hf_config(p).layers.at(0).norm_before_gate);
}

// Hugging Face's Mamba2 model (model_type mamba2): unprefixed names, a Mamba-2 layer in every block,
// B and C in n_groups groups but the output norm over the whole width (norm_groups 1).
TEST(hf_config, hf_mamba2_normalises_the_whole_width) {
  test::TempDir dir;
  const std::string p = dir.file("mamba2.json");
  std::ofstream(p) << R"({"model_type": "mamba2", "num_hidden_layers": 3, "num_heads": 8, "head_dim": 4,
    "state_size": 16, "n_groups": 2, "conv_kernel": 4, "use_conv_bias": true, "layer_norm_epsilon": 1e-5})";
  const ModelSpec m = model_from_hf_config(p);
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].name(), "mamba2(nh=8,hp=4,ns=16,ng=2,d_conv=4,norm_groups=1)");
  EXPECT_EQ(m.layers[0].norm_group_count(), 1);
}

class hf_config_errors : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::string write(const std::string& text) {
    const std::string p = dir.file("config.json");
    std::ofstream(p) << text;
    return p;
  }
  std::string error_of(const std::string& text) {
    try {
      model_from_hf_config(write(text));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
};

const char* kGdn = R"({"model_type": "qwen3_5_text", "num_hidden_layers": 8, "full_attention_interval": 4,
  "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
  "linear_value_head_dim": 24, "linear_conv_kernel_dim": 4, "rms_norm_eps": 1e-6)";

TEST_F(hf_config_errors, nested_text_config_layer_types_and_the_output_gate) {
  const std::string nested = R"({"model_type": "qwen3_5", "text_config": {"model_type": "qwen3_5_text",
    "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention"],
    "num_hidden_layers": 4, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 24, "linear_conv_kernel_dim": 3, "output_gate_type": "sigmoid"}})";
  const ModelSpec m = model_from_hf_config(write(nested));
  ASSERT_EQ(m.layers.size(), 3u);
  EXPECT_EQ(m.layers[0].name(), "gdn(nk=2,nv=4,kd=16,vd=24,d_conv=3,gate=sigmoid)");
  EXPECT_EQ(model_from_hf_config(write(std::string(kGdn) + "}")).layers.size(), 6u);
}

TEST_F(hf_config_errors, each_bad_config_is_refused_naming_file_and_field) {
  const std::string gdn = kGdn;
  struct Bad { std::string text, expect; };
  const std::vector<Bad> bad = {
      {"{not json", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {R"({"model_type": "llama", "num_hidden_layers": 32})", "describes no recurrent layer"},
      {gdn + R"(, "linear_num_key_heads": 3})", "not a multiple of linear_num_key_heads"},
      {R"({"num_hidden_layers": 8, "full_attention_interval": 4, "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_key_head_dim": 0, "linear_value_head_dim": 24,
          "linear_conv_kernel_dim": 4})", "'linear_key_head_dim' is 0"},
      {R"({"num_hidden_layers": 8, "full_attention_interval": 4, "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_key_head_dim": 16.5, "linear_value_head_dim": 24,
          "linear_conv_kernel_dim": 4})", "'linear_key_head_dim' is 16.5, expected an integer"},
      {R"({"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
          "linear_value_head_dim": 24})", "'linear_conv_kernel_dim' is missing"},
      {R"({"num_hidden_layers": 3, "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 24,
          "linear_conv_kernel_dim": 4})", "'layer_types' has 2 entries for num_hidden_layers 3"},
      {R"({"num_hidden_layers": 4, "hybrid_override_pattern": "M*M", "mamba_num_heads": 8, "mamba_head_dim": 4,
          "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4})", "'hybrid_override_pattern' has 3 layers"},
      {R"({"num_hidden_layers": 2, "hybrid_override_pattern": "M*", "mamba_num_heads": 8, "mamba_head_dim": 4,
          "ssm_state_size": 16, "n_groups": 3, "conv_kernel": 4})", "'n_groups' is 3, not a divisor"},
  };
  for (const Bad& b : bad) {
    const std::string e = error_of(b.text);
    EXPECT_NE(e.find(dir.file("config.json")), std::string::npos) << "names the file: " << e;
    EXPECT_NE(e.find(b.expect), std::string::npos) << "expected '" << b.expect << "' in: " << e;
  }
  try {
    model_from_hf_config(dir.file("missing.json"));
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ssm
