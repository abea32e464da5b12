// Reference gates: beta = sigmoid(b), dt = softplus(min(a + dt_bias, 20)),
// A = exp(min(A_log, 20)), g = clamp(exp(-A dt), 1e-6, 1 - 1e-6) (GateMath::clamped, the contract;
// counterpart: cuda/gdn_gates.cuh), or torch's saturation (GateMath::torch: dt = x > 20 ? x :
// softplus(x), A = exp(A_log), g = exp(-A dt); no CUDA counterpart).
#include <algorithm>
#include <cmath>

#include "reference/branches.h"
#include "reference/gdn_math.h"

namespace ssm::ref {

Gates gates(const LayerSpec& s, const LayerWeights& w, const float* a, const float* b) {
  Gates out{VecD(s.nv), VecD(s.nv), VecD(s.nv)};
  for (int vh = 0; vh < s.nv; ++vh) {
    out.beta[vh] = 1.0 / (1.0 + std::exp(-double(b[vh])));
    const double x = double(a[vh]) + double(w.dt_bias[size_t(vh)]), al = double(w.A_log[size_t(vh)]);
    if (x > 20.0) count_branch(Branch::softplus_threshold);
    if (al > 20.0) count_branch(Branch::alog_clamp);
    const bool torch = s.numerics.gates == GateMath::torch;
    const double dt = torch && x > 20.0 ? x : std::log1p(std::exp(std::min(x, 20.0)));
    const double A = std::exp(torch ? al : std::min(al, 20.0));
    const double g = std::exp(-A * dt);
    if (g < 1e-6) count_branch(Branch::g_clamp_low);
    if (g > 1.0 - 1e-6) count_branch(Branch::g_clamp_high);
    out.g[vh] = torch ? g : std::clamp(g, 1e-6, 1.0 - 1e-6);
    // g's relative error per unit roundoff: x = a + dt_bias rounds, softplus amplifies that by its
    // relative condition x sigmoid(x) / softplus(x) (1 where torch's softplus is x itself), A dt
    // adds a few roundings, and exp(-A dt) multiplies the relative error of A dt by |A dt| =
    // |ln g|; a clamped g is a constant
    const double xs = std::min(x, 20.0);
    const double sp_cond = torch && x > 20.0 ? 1.0 : std::fabs(xs / (1.0 + std::exp(-xs))) / std::max(dt, 1e-300);
    out.g_cond[vh] = out.g[vh] == g ? 1.0 + A * dt * (sp_cond + 4.0) : 1.0;
  }
  return out;
}

}  // namespace ssm::ref
