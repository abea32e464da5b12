// Reference delta-rule update of one value head. Counterpart: cuda/gdn_decode.cu.
#include "reference/gdn_math.h"

namespace ssm::ref {

void delta_rule(MatD& H, const VecD& k, const VecD& v, double g, double beta) {
  const VecD hk = H.transpose() * k;       // [vd]
  const VecD vn = (v - g * hk) * beta;     // [vd]
  H = g * H + k * vn.transpose();          // [kd x vd]
}

}  // namespace ssm::ref
