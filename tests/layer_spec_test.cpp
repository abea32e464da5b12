// core/layer_spec.h: presets have the contract's shapes; invalid shapes are refused by name.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/layer_spec.h"
#include "core/model.h"

namespace ssm {

TEST(LayerSpec, Qwen3NextShapes) {
  const ModelSpec m = make_preset("qwen3-next-80b");
  ASSERT_EQ(m.layers.size(), 36u);
  EXPECT_EQ(m.layers[0].conv_dim(), 8192);
  EXPECT_EQ(m.layers[0].h_elems() * 4, 2 << 20);  // 2 MiB of FP32 h per layer
  EXPECT_EQ(make_preset("qwen3.6-27b").layers[0].conv_dim(), 10240);
  EXPECT_EQ(make_preset("qwen3-next-80b", 3).layers.size(), 3u);
}

TEST(LayerSpec, TinyPreset) {
  const ModelSpec m = make_preset("tiny");
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].name(), "gdn(nk=1,nv=2,kd=8,vd=12,d_conv=4)");
  EXPECT_EQ(m.layers[0].conv_dim(), 2 * 8 + 2 * 12);
}

TEST(LayerSpec, EveryPresetIsValid) {
  for (const auto& name : preset_names()) EXPECT_NO_THROW(make_preset(name, 2)) << name;
}

TEST(LayerSpec, InvalidShapesAreRefused) {
  LayerSpec s;
  s.nk = 2;
  s.nv = 3;
  try {
    s.validate();
    FAIL() << "nv=3, nk=2 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of nk"), std::string::npos);
  }
  EXPECT_THROW(make_preset("qwen4"), std::invalid_argument);
  EXPECT_THROW(parse_h_mode("bf16"), std::invalid_argument);
}

TEST(PoolConfig, TieredCapacitiesAndDummySlot) {
  PoolConfig p;
  p.max_slots = 3;
  p.h_capacity = {1, 7, 3};
  p.conv_capacity = 7;
  EXPECT_EQ(p.capacity(1), 7);
  EXPECT_EQ(p.capacity(3), 7);  // the dummy slot serves any padding row
  EXPECT_EQ(p.name(), "pool(h=f32,slots=3,cap=[1,7,3],conv_cap=7,snap=2)");
  p.h_capacity = {1, 2};
  EXPECT_THROW(p.validate(), std::invalid_argument);
}

}  // namespace ssm
