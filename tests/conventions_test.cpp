// core/conventions.h: conventions by name, and an engine's state layouts to the contract's.
#include "core/conventions.h"
#include "core/half.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace ssm {
namespace {

std::string error_of(const std::string& name, const std::string& value) {
  LayerSpec n;
  StateLayout l;
  try {
    set_convention(n, l, name, value);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Conventions, EveryNameSetsItsFieldAndPrintsBack) {
  LayerSpec s;
  Numerics& n = s.numerics;
  StateLayout l;
  EXPECT_EQ(convention_names().size(), 6u);
  set_convention(s, l, "gates", "torch");
  set_convention(s, l, "f16_store", "inf");
  set_convention(s, l, "f16_rows", "carried");
  set_convention(s, l, "conv_window", "d_conv-1");
  set_convention(s, l, "h_layout", "nv,vd,kd");
  EXPECT_EQ(n.flags(), " --gates torch --f16-store inf --f16-rows carried");
  EXPECT_EQ(std::string(to_string(l.conv_window)), "d_conv-1");
  EXPECT_EQ(std::string(to_string(l.h_layout)), "nv,vd,kd");
  EXPECT_FALSE(l.is_contract());
  set_convention(s, l, "conv_window", "d_conv");
  set_convention(s, l, "h_layout", "nv,kd,vd");
  set_convention(s, l, "gates", "clamped");
  EXPECT_TRUE(l.is_contract());
  EXPECT_EQ(n.gates, GateMath::clamped);
  set_convention(s, l, "norm_groups", "1");
  EXPECT_EQ(s.norm_groups, 1);
}

TEST(Conventions, UnknownNamesAndValuesAreRefusedNamingThem) {
  EXPECT_EQ(
      error_of("gate", "torch"),
      "unknown convention 'gate' (known: gates, f16_store, f16_rows, conv_window, h_layout, norm_groups); did you mean gates?");
  EXPECT_EQ(error_of("frobnicate", "x"),
            "unknown convention 'frobnicate' (known: gates, f16_store, f16_rows, conv_window, h_layout, norm_groups)");
  EXPECT_EQ(error_of("norm_groups", "-1"), "norm_groups '-1': expected an integer (0: ng, 1: the whole width)");
  EXPECT_EQ(error_of("gates", "tourch"), "gates 'tourch': expected clamped or torch");
  EXPECT_EQ(error_of("conv_window", "d_conv-2"), "conv_window 'd_conv-2': expected d_conv or d_conv-1");
  EXPECT_EQ(error_of("h_layout", "vd,kd"), "h_layout 'vd,kd': expected nv,kd,vd or nv,vd,kd");
}

TEST(Conventions, NearMissIsAtMostTwoEdits) {
  EXPECT_TRUE(near_miss("gate", "gates"));
  EXPECT_TRUE(near_miss("F16_Store", "f16_store"));
  EXPECT_TRUE(near_miss("f16store", "f16_store"));
  EXPECT_FALSE(near_miss("kind", "gates"));
  EXPECT_FALSE(near_miss("conv_bias", "conv_window"));
}

// h in [nv][vd][kd] (Mamba-2 [nh][ns][hp]) comes back in the contract's order, every element
// where it belongs, in both dtypes; the contract's layout comes back as it is.
TEST(Conventions, TransposedHComesBackInTheContractsLayout) {
  LayerSpec g;  // gdn nk=1 nv=2 kd=3 vd=5
  g.nv = 2;
  g.kd = 3;
  g.vd = 5;
  LayerSpec m;
  m.kind = LayerKind::mamba2;
  m.nh = 2;
  m.hp = 3;
  m.ns = 4;
  m.ng = 1;
  StateLayout swapped;
  swapped.h_layout = HLayout::vd_kd;
  for (const LayerSpec* s : {&g, &m})
    for (DType dt : {DType::f32, DType::f16}) {
      const std::vector<int64_t> d = s->h_shape();
      Tensor eng = Tensor::zeros(dt, h_shape_in(*s, swapped));
      ASSERT_EQ(eng.shape(), (std::vector<int64_t>{d[0], d[2], d[1]}));
      for (int64_t i = 0; i < eng.size(); ++i)
        if (dt == DType::f32) eng.f32()[i] = float(i);
        else eng.f16()[i] = float_to_half_rne(float(i));
      const Tensor c = h_to_contract(eng, *s, swapped);
      ASSERT_EQ(c.shape(), d);
      for (int64_t a = 0; a < d[0]; ++a)
        for (int64_t b = 0; b < d[1]; ++b)
          for (int64_t k = 0; k < d[2]; ++k)
            ASSERT_EQ(c.get((a * d[1] + b) * d[2] + k), float((a * d[2] + k) * d[1] + b)) << s->name();
      EXPECT_EQ(h_to_contract(c, *s, StateLayout{}).get(7), c.get(7));
      EXPECT_THROW(h_to_contract(c, *s, swapped), std::invalid_argument);  // the contract's shape is not the engine's
    }
}

// A d_conv-1 window lands in columns 1..d_conv-1; column 0 is zero (not kept, not compared).
TEST(Conventions, ShortConvWindowFillsTheNewestColumns) {
  LayerSpec s;
  s.nv = 2;
  s.kd = 3;
  s.vd = 5;
  s.d_conv = 4;
  StateLayout shortw;
  shortw.conv_window = ConvWindow::d_conv_minus_1;
  Tensor eng = Tensor::zeros(DType::f32, conv_shape_in(s, shortw));
  ASSERT_EQ(eng.shape(), (std::vector<int64_t>{s.conv_dim(), 3}));
  for (int64_t i = 0; i < eng.size(); ++i) eng.f32()[i] = float(i + 1);
  const Tensor c = conv_to_contract(eng, s, shortw);
  ASSERT_EQ(c.shape(), (std::vector<int64_t>{s.conv_dim(), 4}));
  for (int ch = 0; ch < s.conv_dim(); ++ch) {
    EXPECT_EQ(c.get(ch * 4), 0.0f);
    for (int j = 1; j < 4; ++j) EXPECT_EQ(c.get(ch * 4 + j), float(ch * 3 + j)) << ch << " " << j;
  }
  EXPECT_THROW(conv_to_contract(c, s, shortw), std::invalid_argument);
}

}  // namespace
}  // namespace ssm
