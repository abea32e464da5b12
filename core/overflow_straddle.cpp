// fp16_overflow_straddles (core/overflow_straddle.h).
#include "core/overflow_straddle.h"

#include <cmath>
#include <map>

#include "core/half.h"

namespace ssm {
namespace {

constexpr uint16_t kInf = 0x7c00u, kMaxFinite = 0x7bffu, kSign = 0x8000u;

bool h_like(FieldKind k) {
  return k == FieldKind::h || k == FieldKind::h_checkpoint || k == FieldKind::h_intermediate || k == FieldKind::stage;
}

// inf against the same-signed 65504, in either order
bool straddle_bits(uint16_t x, uint16_t y) {
  if ((x & kSign) != (y & kSign)) return false;
  const uint16_t ax = x & uint16_t(~kSign), ay = y & uint16_t(~kSign);
  return (ax == kInf && ay == kMaxFinite) || (ax == kMaxFinite && ay == kInf);
}

bool straddle_f32(float x, float y) {
  if (!(x == x) || !(y == y)) return false;          // NaN
  if (std::isinf(x) || std::isinf(y)) return false;  // an FP32 inf is no rounding
  return straddle_bits(float_to_half_rne(x), float_to_half_rne(y));
}

}  // namespace

std::vector<StateElement> fp16_overflow_straddles(const SequenceState& a, const SequenceState& b) {
  std::map<FieldKey, const Tensor*> of_b;
  for_each_field(b, [&](const FieldKey& k, const Tensor& t) {
    if (h_like(k.kind)) of_b[k] = &t;
  });
  std::vector<StateElement> out;
  for_each_field(a, [&](const FieldKey& k, const Tensor& ta) {
    const auto it = of_b.find(k);
    if (it == of_b.end()) return;
    const Tensor& tb = *it->second;
    if (ta.dtype() != tb.dtype() || ta.shape() != tb.shape()) return;
    if (ta.dtype() != DType::f32) return;  // FP16 fields: see the header
    const float *x = ta.f32(), *y = tb.f32();
    for (int64_t i = 0; i < ta.size(); ++i)  // the threshold's neighbourhood only: a cheap test first
      if ((std::fabs(x[i]) >= 65504.0f || std::fabs(y[i]) >= 65504.0f) && straddle_f32(x[i], y[i]))
        out.push_back({k, i});
  });
  return out;
}

}  // namespace ssm
