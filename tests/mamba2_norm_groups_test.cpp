// A Mamba-2 layer's output norm groups (LayerSpec::norm_groups): 1 normalises the whole width, as
// Hugging Face's Mamba2 model does whatever n_groups is; 0 keeps Nemotron-H's ng groups. The
// reference's output stage against values computed here; the name, the bounds, the capability
// (the CUDA backend and plug-ins normalise by ng only: cannot_run names the layer) and a trace
// round trip of the attribute.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "core/capabilities.h"
#include "formats/trace.h"
#include "reference/mamba2_math.h"

namespace ssm {
namespace {

LayerSpec layer(int norm_groups) {
  LayerSpec s;
  s.kind = LayerKind::mamba2;
  s.nh = 4;
  s.hp = 3;
  s.ns = 5;
  s.ng = 2;
  s.d_conv = 4;
  s.eps = 1e-5f;
  s.norm_groups = norm_groups;
  return s;
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }

TEST(Mamba2NormGroups, WholeWidthNormalisesEveryChannelTogether) {
  const unsigned seed = 20261204;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int n = 12;
  LayerWeights w;
  w.norm_w.resize(n);
  ref::VecD y(n);
  std::vector<float> z(n);
  for (int j = 0; j < n; ++j) {
    w.norm_w[size_t(j)] = 0.5f + 0.1f * float(j);
    y[j] = u(rng);
    z[size_t(j)] = u(rng);
  }
  // by hand: u = y silu(z) (norm after the gate), normalised over `groups` groups of n/groups channels
  auto expected = [&](int groups) {
    std::vector<double> out(n);
    const int g = n / groups;
    for (int k = 0; k < groups; ++k) {
      double ss = 0;
      for (int j = k * g; j < (k + 1) * g; ++j) ss += std::pow(y[j] * silu(z[size_t(j)]), 2);
      const double r = 1.0 / std::sqrt(ss / g + double(1e-5f));  // the layer's eps is a float
      for (int j = k * g; j < (k + 1) * g; ++j) out[size_t(j)] = y[j] * silu(z[size_t(j)]) * r * w.norm_w[size_t(j)];
    }
    return out;
  };
  const ref::VecD whole = ref::mamba2_output_norm(layer(1), w, y, z.data());
  const ref::VecD grouped = ref::mamba2_output_norm(layer(0), w, y, z.data());
  const std::vector<double> e1 = expected(1), e2 = expected(2);
  double differ = 0;
  for (int j = 0; j < n; ++j) {
    EXPECT_NEAR(whole[j], e1[size_t(j)], 1e-12 * std::fabs(e1[size_t(j)]) + 1e-15) << j;
    EXPECT_NEAR(grouped[j], e2[size_t(j)], 1e-12 * std::fabs(e2[size_t(j)]) + 1e-15) << j;
    differ = std::max(differ, std::fabs(whole[j] - grouped[j]));
  }
  EXPECT_GT(differ, 1e-3) << "the two groupings must differ on these values, or the test shows nothing";
}

TEST(Mamba2NormGroups, NameBoundsAndCapability) {
  EXPECT_EQ(layer(1).name(), "mamba2(nh=4,hp=3,ns=5,ng=2,d_conv=4,no_bias,norm_groups=1)");
  EXPECT_EQ(layer(2).name(), layer(0).name()) << "norm_groups = ng is the default";
  EXPECT_NO_THROW(layer(1).validate());
  EXPECT_THROW(layer(5).validate(), std::invalid_argument);  // 5 does not divide nh*hp = 12
  LayerSpec g;
  g.norm_groups = 1;
  EXPECT_THROW(g.validate(), std::invalid_argument);  // a GDN layer has none
  ModelSpec m{"m", {layer(0), layer(1)}};
  Capabilities caps;
  EXPECT_EQ(caps.cannot_run(m, "reference"), "");
  caps.norm_groups = false;
  EXPECT_EQ(
      caps.cannot_run(m, "cuda"),
      "layer 1 is mamba2(nh=4,hp=3,ns=5,ng=2,d_conv=4,no_bias,norm_groups=1); cuda normalises a Mamba-2 output by its "
      "ng groups only");
  m.layers[1].norm_groups = 0;
  EXPECT_EQ(caps.cannot_run(m, "cuda"), "");
}

TEST(Mamba2NormGroups, TracesKeepTheAttribute) {
  namespace fs = std::filesystem;
  const fs::path p = fs::temp_directory_path() / ("mamba2_norm_groups_test." + std::to_string(::getpid()) + ".h5");
  formats::TraceHeader h;
  h.producer = "mamba2_norm_groups_test";
  h.model.spec = ModelSpec{"m", {layer(1)}};
  LayerWeights w;
  for (const WeightField& f : layer(1).weights()) {
    size_t n = 1;
    for (int64_t d : f.shape) n *= size_t(d);
    w.*f.member = std::vector<float>(n, 0.5f);
  }
  h.model.weights = {w};
  h.pool.max_slots = 1;
  h.pool.h_capacity = {2};
  formats::TraceOp alloc;
  alloc.op = parse_op("alloc");
  formats::write_trace(p.string(), h, {alloc});
  const formats::Trace t = formats::read_trace(p.string());
  fs::remove(p);
  ASSERT_EQ(t.header.model.spec.layers.size(), 1u);
  EXPECT_EQ(t.header.model.spec.layers[0].norm_groups, 1);
}

}  // namespace
}  // namespace ssm
