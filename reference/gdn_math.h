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

// The short convolution of every kind (conv.cpp): shifts window [conv_dim][d_conv] left, appends
// x[conv_dim], returns silu(bias + w . window). err (optional): as conv_update's, before any norm.
VecD conv_silu_update(const LayerSpec& s, const LayerWeights& w, float* window, const float* x, VecD* err = nullptr);

// GDN conv update (gdn_conv.cpp): shifts window [conv_dim][d_conv] left, appends x[conv_dim],
// returns silu(bias + w . window) with Q and K normalised per head of kd channels.
// err (optional): per channel, the absolute error an FP32 evaluation may carry, per unit roundoff
// (the conv sum's sum of |terms| through silu's derivative, then through the normalisation).
VecD conv_update(const LayerSpec& s, const LayerWeights& w, float* window, const float* x, VecD* err = nullptr);

struct Gates {
  VecD g;       // [nv] decay, clamped to [1e-6, 1 - 1e-6]
  VecD beta;    // [nv]
  VecD g_cond;  // [nv] g's relative error in an FP32 evaluation, per unit roundoff (>= 1)
};
// Gates (gdn_gates.cpp) from one token's a[nv], b[nv].
Gates gates(const LayerSpec& s, const LayerWeights& w, const float* a, const float* b);

// Delta rule (gdn_delta_rule.cpp) for one value head: H [kd x vd] <- g*H + k (outer) (v - g*H^T k)*beta.
void delta_rule(MatD& H, const VecD& k, const VecD& v, double g, double beta);

// Condition of the delta rule (gdn_delta_rule.cpp), carried through the rows: rho[j] is the RMS
// error an FP32 implementation may carry over column j of the head, per unit roundoff, and S
// [kd x kd] (trace 1) the shape of that error over the rows of the columns (docs/tolerances.md,
// "Condition of the state"). Given H BEFORE the update, k and v with their absolute errors dk, dv
// (conv_update's err) and g's relative error gc (Gates::g_cond):
//   rho_j <- sqrt(g^2 shrink rho_j^2 + mean_i local_ij^2),  shrink = 1 - beta (2 - beta |k|^2) k^T S k,
//   local_ij = gc g |H_ij| + (|k_i| + dk_i) 2 |vn_j|
//              + |k_i| beta (|v_j| + dv_j + g sum_i' (gc |H_i'j k_i'| + |H_i'j| dk_i')),
//   vn = beta (v - g H^T k).
// The update maps a column's carried error e by g (I - beta k k^T): its part along k is erased as
// the state's is (E|(I - beta k k^T) e|^2 = |e|^2 shrink for e of covariance proportional to S),
// the rest is kept, and S follows where the error lies, so keys that keep hitting one direction
// earn no credit for the others. Each row adds the rounding of its own terms, independent of the
// other rows': they add in quadrature (probabilistic rounding error analysis), so a systematic bias
// of one ULP per row outgrows the bound.
void delta_rule_condition(const MatD& H, const VecD& k, const VecD& dk, const VecD& v, const VecD& dv, double g,
                          double gc, double beta, float* rho, float* S);  // rho [vd], S [kd][kd]

// Output norm (gdn_output_norm.cpp) of one value head: o * rsqrt(mean(o^2) + eps) * norm_w * gate(z).
VecD output_norm(const LayerSpec& s, const LayerWeights& w, const VecD& o, const float* z);

// The first-order error bound of a head's output o = H^T q qscale per unit roundoff (gdn_step.cpp):
// sum_i max(|H_ij|, rms(H)) |q_i| qscale (state errors at the head's scale, as fp32-state assumes),
// plus kUnderflowPerProduct for each of its kd + 1 products (reference/underflow.h).
VecD gdn_output_dot_condition(const MatD& H, const VecD& q, double qscale);

// Condition of the output norm (gdn_output_norm.cpp): given S[j] >= the first-order error of o[j]
// per unit roundoff, the bound on the error of out[j] per unit roundoff:
//   |c_j| r (S_j + |o_j| r^2 mean_k(|o_k| S_k)) + 3 2^-126,  c_j = norm_w[j] gate(z_j),
//   r = 1/sqrt(mean(o^2)+eps) (perturbing o by dO changes r by -r^3 mean(o dO); the last term is
//   the underflow of the stage's three products, reference/underflow.h).
VecD output_norm_condition(const LayerSpec& s, const LayerWeights& w, const VecD& o, const VecD& S, const float* z);

// The state's condition carried through the rows (delta_rule_condition), per h-like field.
struct StateCondition {
  Tensor rho;    // [nv, vd] f32: RMS error bound per column, per unit roundoff
  Tensor shape;  // [nv, kd, kd] f32: S of every head, trace 1
};
StateCondition fresh_gdn_state_condition(const LayerSpec& s);  // rho 0, S = I / kd per head

// FP16 h widened to FP32 (exact); gdn_step.cpp.
Tensor widen_to_f32(const Tensor& h16);

// One token through one layer (gdn_step.cpp): conv, gates, delta rule on every value head of h,
// storing h in its dtype (f32: round to FP32; f16: kernel store, clamped), then the output
// from the STORED state. out: [nv*vd]. cond (optional, [nv*vd]): the output's condition
// (core/model.h StepOutputs::condition): o_j = H^T q / sqrt(kd) moves by at most
// sum_i max(|H_ij|, rms(H)) |q_i| / sqrt(kd) per unit relative error of its terms (state errors are
// at the head's scale, as in fp32-state), carried through the output norm. h_cond (optional): the
// state's condition, updated in place. carried (optional, F16Rows::carried on FP16 h): the FP32
// state the rows of one op carry; the row starts from it instead of h, writes it back rounded to
// FP32, still stores h in FP16, and its output reads the carried FP32 state.
void gdn_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window,
              const float* x, const float* a, const float* b, const float* z, float* out,
              float* cond = nullptr, StateCondition* h_cond = nullptr, Tensor* carried = nullptr);

}  // namespace ssm::ref
