// reference/layer_step.h
#include "reference/layer_step.h"

#include "reference/mamba2_math.h"

namespace ssm::ref {

void layer_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window, const LayerRows& r, size_t t,
                float* out, float* cond, StateCondition* h_cond, Tensor* carried) {
  const float* x = r.conv_in.data() + t * size_t(s.conv_dim());
  const float* z = r.gate_in.data() + t * size_t(s.out_dim());
  switch (s.kind) {
    case LayerKind::gdn:
      gdn_step(s, w, h, window, x, r.dt_in.data() + t * size_t(s.nv), r.beta_in.data() + t * size_t(s.nv), z, out, cond,
               h_cond, carried);
      return;
    case LayerKind::mamba2:
      mamba2_step(s, w, h, window, x, r.dt_in.data() + t * size_t(s.nh), z, out, cond, carried);
      return;
  }
}

StateCondition fresh_state_condition(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::gdn: return fresh_gdn_state_condition(s);
    case LayerKind::mamba2: return StateCondition{};
  }
  return StateCondition{};
}

}  // namespace ssm::ref
