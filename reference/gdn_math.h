// Per-token GDN math of STATE-MODEL section 3 in FP64 (the reference's compute precision).
// One function per transition; the callers in gdn_step.cpp decide where storage rounds.
#pragma once
#include <Eigen/Core>

#include "core/layer_spec.h"
#include "core/model.h"
#include "core/tensor.h"

namespace ssm::ref {

using VecD = Eigen::VectorXd;
using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Conv update (gdn_conv.cpp): shifts window [conv_dim][d_conv] left, appends x[conv_dim],
// returns silu(bias + w . window) with Q and K normalised per head of kd channels.
VecD conv_update(const LayerSpec& s, const LayerWeights& w, float* window, const float* x);

struct Gates {
  VecD g;     // [nv] decay, clamped to [1e-6, 1 - 1e-6]
  VecD beta;  // [nv]
};
// Gates (gdn_gates.cpp) from one token's a[nv], b[nv].
Gates gates(const LayerSpec& s, const LayerWeights& w, const float* a, const float* b);

// Delta rule (gdn_delta_rule.cpp) for one value head: H [kd x vd] <- g*H + k (outer) (v - g*H^T k)*beta.
void delta_rule(MatD& H, const VecD& k, const VecD& v, double g, double beta);

// Output norm (gdn_output_norm.cpp) of one value head: o * rsqrt(mean(o^2) + eps) * norm_w * gate(z).
VecD output_norm(const LayerSpec& s, const LayerWeights& w, const VecD& o, const float* z);

// Condition of the output norm (gdn_output_norm.cpp): given S[j] >= the first-order error of o[j]
// per unit roundoff, the bound on the error of out[j] per unit roundoff:
//   |c_j| r (S_j + |o_j| r^2 mean_k(|o_k| S_k)),  c_j = norm_w[j] gate(z_j), r = 1/sqrt(mean(o^2)+eps)
// (perturbing o by dO changes r by -r^3 mean(o dO)).
VecD output_norm_condition(const LayerSpec& s, const LayerWeights& w, const VecD& o, const VecD& S, const float* z);

// One token through one layer (gdn_step.cpp): conv, gates, delta rule on every value head of h,
// storing h in its dtype (f32: round to FP32; f16: kernel store, clamped), then the output
// from the STORED state. out: [nv*vd]. cond (optional, [nv*vd]): the output's condition
// (core/model.h StepOutputs::condition): o_j = H^T q / sqrt(kd) moves by at most
// sum_i max(|H_ij|, rms(H)) |q_i| / sqrt(kd) per unit relative error of its terms (state errors are
// at the head's scale, as in fp32-state), carried through the output norm.
void gdn_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window,
              const float* x, const float* a, const float* b, const float* z, float* out,
              float* cond = nullptr);

}  // namespace ssm::ref
