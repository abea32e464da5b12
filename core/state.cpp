// State helpers (see state.h).
#include "core/state.h"

#include <algorithm>

namespace ssm {

int64_t stage_elems(const ModelSpec& m) {
  int64_t n = 0;
  for (const auto& l : m.layers) n = std::max(n, l.h_elems());
  return n;
}

PleCarry fresh_ple_carry(const LayerSpec& s) {
  PleCarry c{Tensor::zeros(DType::f32, ple_history_shape(s)), Tensor::zeros(DType::f32, ple_conv_shape(s))};
  std::fill(c.history.f32(), c.history.f32() + c.history.size(), float(s.ple.eos_id));
  return c;
}

const Tensor* state_field(const LayerState& s, const std::string& name, int t) {
  auto opt = [](const auto& o) -> const Tensor* { return o ? &*o : nullptr; };
  auto at = [t](const std::vector<Tensor>& v) -> const Tensor* {
    return t >= 0 && size_t(t) < v.size() ? &v[size_t(t)] : nullptr;
  };
  auto carry = [&](const std::optional<PleCarry>& c, bool history) -> const Tensor* {
    return c ? (history ? &c->history : &c->conv) : nullptr;
  };
  auto snapshot = [&](bool history) -> const Tensor* {
    if (t < 0 || size_t(t) >= s.ple_snapshots.size()) return nullptr;
    return history ? &s.ple_snapshots[size_t(t)].history : &s.ple_snapshots[size_t(t)].conv;
  };
  if (name == "h") return &s.h;
  if (name == "conv") return &s.conv;
  if (name == "h_checkpoint") return opt(s.h_checkpoint);
  if (name == "conv_checkpoint") return opt(s.conv_checkpoint);
  if (name == "h_intermediate") return at(s.h_intermediates);
  if (name == "conv_intermediate") return at(s.conv_intermediates);
  if (name == "ple_history") return carry(s.ple, true);
  if (name == "ple_conv") return carry(s.ple, false);
  if (name == "ple_history_checkpoint") return carry(s.ple_checkpoint, true);
  if (name == "ple_conv_checkpoint") return carry(s.ple_checkpoint, false);
  if (name == "ple_history_snapshot") return snapshot(true);
  if (name == "ple_conv_snapshot") return snapshot(false);
  return nullptr;
}

Tensor broadcast_condition(const Tensor& cond, const std::vector<int64_t>& field_shape) {
  const auto& cs = cond.shape();
  if (cs.size() != 2 || cond.dtype() != DType::f32) return cond;
  const int64_t nv = cs[0], vd = cs[1];
  if (field_shape.size() == 3 && field_shape[0] == nv && field_shape[2] == vd) {
    Tensor full = Tensor::zeros(DType::f32, field_shape);
    float* out = full.f32();
    for (int64_t v = 0; v < nv; ++v)  // head v's row of the condition, repeated over its middle axis
      for (int64_t i = 0; i < field_shape[1]; ++i, out += vd) std::copy_n(cond.f32() + v * vd, vd, out);
    return full;
  }
  return cond;
}

}  // namespace ssm
