// Per-token Mamba-2 math of STATE-MODEL section 3 in FP64 (the reference's compute precision),
// as Hugging Face transformers' Nemotron-H and mamba_ssm compute it (docs/state-model.md,
// "Mamba-2"). One function per step; mamba2_step.cpp decides where storage rounds. The short
// convolution is every kind's (conv.cpp: silu, no norm).
#pragma once
#include "reference/gdn_math.h"

namespace ssm::ref {

struct Mamba2Gates {
  VecD dt;  // [nh] softplus(dt + dt_bias) (linear above 20), clamped to [dt_min, dt_max]
  VecD dA;  // [nh] exp(-exp(A_log) dt), at least kMamba2MinDecay
};
// Gates of one token (mamba2_gates.cpp) from dt[nh] (before dt_bias).
Mamba2Gates mamba2_gates(const LayerSpec& s, const LayerWeights& w, const float* dt);

// One head's state update (mamba2_ssm.cpp): H [hp x ns] <- dA H + dt x B^T.
void mamba2_ssm_update(MatD& H, const VecD& x, const VecD& B, double dt, double dA);
// One head's output from the (stored) state: y = H C + D x.
VecD mamba2_ssm_output(const MatD& H, const VecD& C, const VecD& x, double D);
// The first-order error bound of y per unit roundoff (mamba2_ssm.cpp): for each row p,
// sum_n max(|H_pn|, rms(H)) |C_n| + |D x_p| (state errors at the head's scale, as fp32-state
// assumes), plus kUnderflowPerProduct for each of its ns + 1 products (reference/underflow.h).
VecD mamba2_ssm_output_condition(const MatD& H, const VecD& C, const VecD& x, double D);

// Output stage (mamba2_output_norm.cpp), every head at once (the groups span heads): y [nh*hp],
// z [nh*hp]; norm after the gate (Nemotron-H, norm_before_gate false):
//   u = y silu(z), out = u / sqrt(mean_group(u^2) + eps) norm_w;
// norm before the gate: out = y / sqrt(mean_group(y^2) + eps) norm_w silu(z). Groups are ng
// consecutive runs of nh*hp/ng channels.
VecD mamba2_output_norm(const LayerSpec& s, const LayerWeights& w, const VecD& y, const float* z);
// Its condition: given S[j] >= the first-order error of y[j] per unit roundoff, the bound on the
// error of out[j] per unit roundoff (the GDN output norm's formula, gdn_math.h, on each group of
// the normalised quantity, with the underflow of its products: reference/underflow.h).
VecD mamba2_output_norm_condition(const LayerSpec& s, const LayerWeights& w, const VecD& y, const VecD& S,
                                  const float* z);

// One token through one Mamba-2 layer (mamba2_step.cpp): conv (silu), gates, then per head the
// state update, the store of h in its dtype (f32: round to FP32; f16: kernel store), and y from
// the STORED state (or, F16Rows::carried on FP16 h, from the FP32 state the op's rows carry, as
// gdn_step); then the gated norm of all heads. out: [nh*hp]. cond (optional, [nh*hp]): the output's
// condition, mamba2_ssm_output_condition carried through the output stage. The state carries no
// condition (fp32-state's fixed limits judge it: docs/tolerances.md, "Mamba-2").
void mamba2_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window, const float* xBC,
                 const float* dt, const float* z, float* out, float* cond = nullptr, Tensor* carried = nullptr);

}  // namespace ssm::ref
