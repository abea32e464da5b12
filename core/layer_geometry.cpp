// Everything about a layer that depends on its kind: field shapes, per-token inputs, weights and
// the output's shape (core/layer_spec.h). The one place a layer kind's geometry is written down;
// a new kind adds a case to each function here.
#include <stdexcept>

#include "core/layer_spec.h"
#include "core/model.h"

namespace ssm {

namespace {
[[noreturn]] void unknown_kind(LayerKind k) {
  throw std::logic_error(std::string("layer kind ") + std::to_string(int(k)) + " has no geometry");
}
}  // namespace

int LayerSpec::conv_dim() const {
  switch (kind) {
    case LayerKind::gdn: return 2 * nk * kd + nv * vd;  // [Q | K | V]
    case LayerKind::mamba2: return nh * hp + 2 * ng * ns;  // [x | B | C]
  }
  unknown_kind(kind);
}

std::vector<int64_t> LayerSpec::h_shape() const {
  switch (kind) {
    case LayerKind::gdn: return {nv, kd, vd};
    case LayerKind::mamba2: return {nh, hp, ns};
  }
  unknown_kind(kind);
}

std::string LayerSpec::h_layout() const {
  switch (kind) {
    case LayerKind::gdn: return "[nv][kd][vd], vd fastest";
    case LayerKind::mamba2: return "[nh][hp][ns], ns fastest";
  }
  unknown_kind(kind);
}

int64_t LayerSpec::h_elems() const {
  int64_t n = 1;
  for (int64_t d : h_shape()) n *= d;
  return n;
}

int LayerSpec::out_heads() const {
  switch (kind) {
    case LayerKind::gdn: return nv;
    case LayerKind::mamba2: return nh;
  }
  unknown_kind(kind);
}

int LayerSpec::out_head_dim() const {
  switch (kind) {
    case LayerKind::gdn: return vd;
    case LayerKind::mamba2: return hp;
  }
  unknown_kind(kind);
}

namespace {
// The kind's own inputs (before any PLE inputs).
std::vector<InputField> kind_inputs(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::gdn:
      return {{"x", &LayerRows::conv_in, s.conv_dim()},
              {"a", &LayerRows::dt_in, s.nv},
              {"b", &LayerRows::beta_in, s.nv},
              {"z", &LayerRows::gate_in, s.out_dim()}};
    case LayerKind::mamba2:
      return {{"xBC", &LayerRows::conv_in, s.conv_dim()},
              {"dt", &LayerRows::dt_in, s.nh},
              {"z", &LayerRows::gate_in, s.out_dim()}};
  }
  unknown_kind(s.kind);
}
}  // namespace

std::vector<InputField> LayerSpec::inputs() const {
  std::vector<InputField> f = kind_inputs(*this);
  if (ple.hosted()) {
    f.push_back({"ple_tokens", &LayerRows::ple_tokens, 1});
    f.push_back({"ple_x", &LayerRows::ple_x, ple.channels});
  }
  return f;
}

std::vector<OutputField> LayerSpec::outputs() const {
  std::vector<OutputField> v = {{"out", &StepOutputs::layers, out_dim()}};
  if (ple.hosted()) v.push_back({"ple_out", &StepOutputs::ple, ple.channels});
  return v;
}

std::vector<WeightField> LayerSpec::weights() const {
  std::vector<WeightField> w = {{"conv_w", &LayerWeights::conv_w, {conv_dim(), d_conv}}};
  if (conv_bias) w.push_back({"conv_bias", &LayerWeights::conv_bias, {conv_dim()}});
  switch (kind) {
    case LayerKind::gdn:
      w.push_back({"A_log", &LayerWeights::A_log, {nv}});
      w.push_back({"dt_bias", &LayerWeights::dt_bias, {nv}});
      w.push_back({"norm_w", &LayerWeights::norm_w, {vd}});
      if (ple.hosted()) w.push_back({"ple_w", &LayerWeights::ple_w, {ple.channels, ple.k_size}});
      return w;
    case LayerKind::mamba2:
      w.push_back({"A_log", &LayerWeights::A_log, {nh}});
      w.push_back({"dt_bias", &LayerWeights::dt_bias, {nh}});
      w.push_back({"D", &LayerWeights::D, {nh}});
      w.push_back({"norm_w", &LayerWeights::norm_w, {int64_t(nh) * hp}});
      return w;
  }
  unknown_kind(kind);
}

std::vector<ShapeParam> LayerSpec::shape_params() const {
  switch (kind) {
    case LayerKind::gdn: return {{"nk", &LayerSpec::nk}, {"nv", &LayerSpec::nv}, {"kd", &LayerSpec::kd}, {"vd", &LayerSpec::vd}};
    case LayerKind::mamba2: return {{"nh", &LayerSpec::nh}, {"hp", &LayerSpec::hp}, {"ns", &LayerSpec::ns}, {"ng", &LayerSpec::ng}};
  }
  unknown_kind(kind);
}

std::vector<StateField> LayerSpec::state_fields() const {
  const std::vector<int64_t> h = h_shape(), conv = {conv_dim(), d_conv};
  std::vector<StateField> f = {{"h", h, false},
                               {"conv", conv, false},
                               {"h_checkpoint", h, false},
                               {"conv_checkpoint", conv, false},
                               {"h_intermediate", h, true},
                               {"conv_intermediate", conv, true}};
  if (ple.hosted()) {
    const std::vector<int64_t> hist = {ple.history_len()}, pconv = {ple.conv_rows(), ple.channels};
    f.push_back({"ple_history", hist, false});
    f.push_back({"ple_conv", pconv, false});
    f.push_back({"ple_history_checkpoint", hist, false});
    f.push_back({"ple_conv_checkpoint", pconv, false});
    f.push_back({"ple_history_snapshot", hist, true});
    f.push_back({"ple_conv_snapshot", pconv, true});
  }
  return f;
}

int64_t LayerSpec::input_floats_per_row() const {
  int64_t n = 0;
  for (const InputField& f : inputs()) n += f.width;
  return n;
}

}  // namespace ssm
