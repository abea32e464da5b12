// FP32 arithmetic near its underflow threshold, in the units of the reference's conditions (the
// error bound per unit roundoff u = 2^-24, docs/tolerances.md).
// With gradual underflow, fl(a * b) = a b (1 + d) + e with |d| <= u and |e| <= u 2^-126 (half
// the subnormal spacing 2^-149; Higham, "Accuracy and Stability of Numerical Algorithms", 2.1),
// and a sum of subnormals is exact. A fused multiply-add rounds once, with the same bound. So on
// top of its relative share every product may add u 2^-126: in condition units, 2^-126 per
// product. Beside a value of ordinary size this is nothing (1e-38); where the terms of a sum are
// themselves about 1e-38 and below, it is the whole error: an H200 campaign (Dec 3, mamba-odd-c,
// f16-pool, value scale 60000) had the reference's output 7.0e-45 against CUDA's -0 (the FP32
// products H C underflowed to 0) on a 7-element head that was otherwise all zero, and failed the
// nrmse guard, nrmse 1 (rms(d) is rms(ref) there), although both sides were right.
// A product with an exact zero factor is exact (0, no rounding, no underflow), and a value whose
// terms are all exactly zero has an all-zero condition, which is what lets an all-zero reference
// output be certified (docs/tolerances.md): so the share is added only where the relative part
// of the bound is not zero (with_underflow).
#pragma once

#include <cstdint>

namespace ssm::ref {

constexpr double kUnderflowPerProduct = 0x1p-126;  // FLT_MIN

// `relative` (a condition's first-order part) plus the underflow share of `products` products,
// or exactly 0 where `relative` is 0 (every term exactly zero).
inline double with_underflow(double relative, int64_t products) {
  return relative > 0 ? relative + double(products) * kUnderflowPerProduct : relative;
}

}  // namespace ssm::ref
