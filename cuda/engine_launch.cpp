// Launching a layer's kernels on the staged batch (see engine.h): the PLE carry's rows where the
// layer hosts one, then the chain conv + gates -> rows -> output norm of its kind. The fields both
// kinds' row kernels and output norms take alike are filled once (fill_rows, fill_norm); only the
// kind's own fields follow at each launch. enqueue_layer is the one dispatch point on the kind.
#include <cmath>

#include "core/mutant.h"
#include "cuda/conv.h"
#include "cuda/engine.h"
#include "cuda/gdn_decode.h"
#include "cuda/gdn_output_norm.h"
#include "cuda/gdn_verify_wy.h"
#include "cuda/mamba2_output_norm.h"
#include "cuda/mamba2_rows.h"
#include "cuda/mutant_bits.h"

namespace ssm::cuda {

namespace {
// The fields RowsParams (GDN) and Mamba2RowsParams share: which rows, which state, how many
// intermediates.
template <typename P>
void fill_rows(P& p, const int* slots, const int* inter_first, char* h, size_t h_pitch, char* h_inter, int B, int R,
               int n_inter) {
  p.slots = slots;
  p.inter_first = inter_first;
  p.h = h;
  p.h_pitch = h_pitch;
  p.h_inter = h_inter;
  p.B = B;
  p.R = R;
  p.n_inter = SSM_MUTANT("cuda_verify_no_h_intermediates") ? 0 : n_inter;  // mutant (bug class 1)
  p.mutants = device_mutant_bits();
}

// The fields NormParams (GDN) and Mamba2NormParams share: the gate input, the weight, the output.
template <typename P>
void fill_norm(P& p, const float* z, const float* norm_w, float* out, int rows, float eps) {
  p.z = z;
  p.norm_w = norm_w;
  p.out = out;
  p.rows = rows;
  p.eps = eps;
}
}  // namespace

void Engine::enqueue_layer(int l, int rows, int n_inter, VerifyArm arm, bool h_f16, char* h, size_t h_pitch) {
  const LayerSpec& s = model_.spec.layers[size_t(l)];
  const LayerPool& lp = pool_.layer(l);
  const int* slots = reinterpret_cast<const int*>(io_.get());
  const bool mamba2 = s.kind == LayerKind::mamba2;  // the one dispatch point on the layer kind
  if (s.ple.hosted()) ple_launch_rows(l, rows);     // independent of the layer's own math

  ConvParams cp{};
  cp.slots = slots;
  cp.conv = reinterpret_cast<float*>(lp.conv.get());
  cp.conv_inter = reinterpret_cast<float*>(lp.conv_intermediates.get());
  cp.conv_pitch = lp.conv_pitch;
  cp.conv_cap = pool_.config().conv_capacity;
  cp.x = staged(l, &LayerRows::conv_in);
  cp.a = staged(l, &LayerRows::dt_in);
  cp.b = staged(l, &LayerRows::beta_in);
  cp.conv_w = reinterpret_cast<const float*>(lp.conv_w.get());
  cp.conv_bias = s.conv_bias ? reinterpret_cast<const float*>(lp.conv_bias.get()) : nullptr;
  cp.A_log = reinterpret_cast<const float*>(lp.A_log.get());
  cp.dt_bias = reinterpret_cast<const float*>(lp.dt_bias.get());
  cp.qkv = reinterpret_cast<float*>(qkv_.get());
  cp.gb = reinterpret_cast<float*>(gb_.get());
  cp.B = batch_;
  cp.R = rows;
  cp.n_inter = n_inter;
  cp.conv_dim = s.conv_dim();
  cp.d_conv = s.d_conv;
  cp.norm_heads = mamba2 ? 0 : 2 * s.nk;
  cp.norm_width = mamba2 ? 0 : s.kd;
  cp.mamba2 = mamba2;
  cp.gate_heads = mamba2 ? s.nh : s.nv;
  cp.dt_min = s.dt_min;
  cp.dt_max = s.dt_max;
  cp.mutants = device_mutant_bits();
  // after a widen of FP16 h the conv kernel launches plainly: as a dependent it would let the row
  // kernels start, and load H, before the widen's stores are visible (issue 41; the mutant keeps
  // the dependent launch, the race a perturbed schedule shows on every run)
  launch_conv(cp, main_, !h_widened_ || SSM_MUTANT("cuda_conv_races_widen"));

  const int min_ctas = 2 * sm_count_;
  float* out = reinterpret_cast<float*>(out_.get()) + io_off_[size_t(l)].out;
  const float* z = staged(l, &LayerRows::gate_in);
  const float* norm_w = reinterpret_cast<const float*>(lp.norm_w.get());
  if (mamba2) {
    Mamba2RowsParams mp{};
    fill_rows(mp, slots, pool_.inter_first_device(), h, h_pitch, lp.h_intermediates.get(), batch_, rows, n_inter);
    mp.xbc = cp.qkv;
    mp.gates = cp.gb;
    mp.D = reinterpret_cast<const float*>(lp.D.get());
    mp.y = reinterpret_cast<float*>(o_.get());
    mp.nh = s.nh;
    mp.hp = s.hp;
    mp.ns = s.ns;
    mp.ng = s.ng;
    launch_mamba2_rows(mp, h_f16, sm_count_, main_);  // both verify arms: Mamba-2 has no WY form

    Mamba2NormParams np{};
    fill_norm(np, z, norm_w, out, batch_ * rows, s.eps);
    np.y = mp.y;
    np.d_inner = s.d_inner();
    np.ng = s.ng;
    np.norm_before_gate = s.norm_before_gate;
    launch_mamba2_output_norm(np, main_);
    return;
  }

  RowsParams rp{};
  fill_rows(rp, slots, pool_.inter_first_device(), h, h_pitch, lp.h_intermediates.get(), batch_, rows, n_inter);
  rp.qkv = cp.qkv;
  rp.gb = cp.gb;
  rp.o = reinterpret_cast<float*>(o_.get());
  rp.nk = s.nk;
  rp.nv = s.nv;
  rp.kd = s.kd;
  rp.vd = s.vd;
  rp.qscale = float(1.0 / std::sqrt(double(s.kd)));
  if (arm == VerifyArm::wy && rows <= kWyMaxRows) launch_gdn_verify_wy(rp, h_f16, min_ctas, main_);
  else launch_gdn_rows(rp, h_f16, min_ctas, main_);

  NormParams np{};
  fill_norm(np, z, norm_w, out, batch_ * rows, s.eps);
  np.o = rp.o;
  np.nv = s.nv;
  np.vd = s.vd;
  np.sigmoid_gate = s.output_gate == OutputGate::sigmoid;
  launch_gdn_output_norm(np, main_);
}

void Engine::enqueue_rows(int rows, int n_inter, VerifyArm arm, bool h_f16) {
  for (int l = 0; l < pool_.layers(); ++l)
    enqueue_layer(l, rows, n_inter, arm, h_f16, pool_.layer(l).h.get(), pool_.layer(l).h_pitch);
}

}  // namespace ssm::cuda
