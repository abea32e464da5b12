// Branch counts of the reference (see branches.h).
#include "reference/branches.h"

#include <cmath>

#include "core/half.h"

namespace ssm::ref {

namespace {
thread_local std::array<int64_t, kBranches> g_counts{};
}

const char* branch_name(Branch b) {
  switch (b) {
    case Branch::softplus_threshold: return "softplus threshold";
    case Branch::alog_clamp: return "A_log clamp";
    case Branch::g_clamp_low: return "g clamp low";
    case Branch::g_clamp_high: return "g clamp high";
    case Branch::f16_store_clamp: return "f16 store clamp";
    case Branch::f16_store_nan: return "f16 store NaN";
    case Branch::f16_convert_overflow: return "f16 converter overflow";
    case Branch::mamba2_softplus_threshold: return "Mamba-2 softplus threshold";
    case Branch::mamba2_dt_min: return "Mamba-2 dt_min clamp";
    case Branch::mamba2_dt_max: return "Mamba-2 dt_max clamp";
    case Branch::count: break;
  }
  return "?";
}

std::optional<LayerKind> branch_kind(Branch b) {
  switch (b) {
    case Branch::softplus_threshold:
    case Branch::alog_clamp:
    case Branch::g_clamp_low:
    case Branch::g_clamp_high: return LayerKind::gdn;
    case Branch::mamba2_softplus_threshold:
    case Branch::mamba2_dt_min:
    case Branch::mamba2_dt_max: return LayerKind::mamba2;
    default: return std::nullopt;
  }
}

void count_branch(Branch b) { ++g_counts[size_t(b)]; }

void add_branch_counts(const std::array<int64_t, kBranches>& counts) {
  for (size_t i = 0; i < counts.size(); ++i) g_counts[i] += counts[i];
}

std::array<int64_t, kBranches> take_branch_counts() {
  const auto out = g_counts;
  g_counts.fill(0);
  return out;
}

uint16_t convert_to_half(float f) {
  const uint16_t h = float_to_half_rne(f);
  if (std::isfinite(f) && (h & 0x7fffu) == 0x7c00u) count_branch(Branch::f16_convert_overflow);
  return h;
}

}  // namespace ssm::ref
