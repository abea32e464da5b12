// Likely causes of a divergent state (see likely_cause.h).
#include "compare/likely_cause.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "core/op.h"

namespace ssm::cmp {

namespace {

constexpr double kMatch = 1e-3;  // relative max error under which a field resembles a candidate
constexpr double kBetter = 0.1;  // ... and at most this fraction of its error against the reference
constexpr float kF16Max = 65504.0f;

// max |a - b| / max |b| over the elements (infinite when the sizes differ or a non-finite value
// differs; equal infinities and NaN against NaN count as equal).
double rel_err(const std::function<float(int64_t)>& a, const std::function<float(int64_t)>& b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = a(i), y = b(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return std::numeric_limits<double>::infinity();
      continue;
    }
    diff = std::max(diff, std::fabs(double(x) - double(y)));
    scale = std::max(scale, std::fabs(double(y)));
  }
  if (diff == 0) return 0;
  return scale > 0 ? diff / scale : std::numeric_limits<double>::infinity();
}

double rel_err(const Tensor& a, const Tensor& b) {
  if (a.size() != b.size() || a.size() == 0) return std::numeric_limits<double>::infinity();
  return rel_err([&](int64_t i) { return a.get(i); }, [&](int64_t i) { return b.get(i); }, a.size());
}

// How `got` resembles `cand` when it differs from `ref`: "exactly" or "to 1e-4 relative"; empty
// when it does not, or not far better than it resembles ref.
std::string resemblance(double to_cand, double to_ref) {
  if (!(to_ref > 0) || !(to_cand <= kMatch) || !(to_cand <= kBetter * to_ref)) return "";
  return to_cand == 0 ? "exactly"
                      : fmt::format("to {:.1e} relative (against the reference's own: {:.1e})", to_cand, to_ref);
}

std::string elements(const Tensor& t) { return fmt::format("{} elements", t.size()); }

struct OpView {
  std::optional<Op> op;
  std::string text;
  explicit OpView(const std::string& t) : text(t) {
    try {
      if (!t.empty()) op = parse_op(t);
    } catch (const std::exception&) {
    }
  }
  bool is(OpKind k) const { return op && op->kind == k; }
};

// What matching the reference's intermediate t (or its checkpoint, t = -1) means after `v`.
std::string reading(const OpView& v, int t, const std::string& field) {
  const std::string what = t < 0 ? "the checkpoint" : fmt::format("intermediate {}", t);
  if (v.is(OpKind::commit)) {
    const int n = v.op->commit_accepted(), k = v.op->commit_verify_rows();
    if (n < k) {
      if (t == n)
        return fmt::format("`{}` must leave intermediate n-1 = {}: commit restores intermediate n instead of n-1?",
                           v.text, n - 1);
      if (t >= 0)
        return fmt::format("`{}` must leave intermediate n-1 = {}: commit restores {} instead?", v.text, n - 1, what);
      return fmt::format(
          "`{}` must leave intermediate {}: commit restores the checkpoint instead of the accepted rows?", v.text,
          n - 1);
    }
    return fmt::format("`{}` keeps all K rows: commit restores {} although every row was accepted?", v.text, what);
  }
  if (v.is(OpKind::rollback) || v.is(OpKind::rollback_and_checkpoint_async)) {
    const int n = v.op->rollback_n();
    const std::string want = n == 0 ? "the checkpoint" : fmt::format("intermediate n-1 = {}", n - 1);
    if (t == n)
      return fmt::format("`{}` must restore {}: rollback restores intermediate n instead of n-1?", v.text, want);
    return fmt::format("`{}` must restore {}: rollback restores {} instead?", v.text, want, what);
  }
  if (v.op)
    return fmt::format(
        "`{}` leaves the live {} at the reference's {}: an op that restores state ran (or this one did not update {})?",
        v.text, field, what, field);
  return "";
}

// A 3-d field read with its last two axes swapped: element [i][j][k] of the result is element
// [i][k][j] of `t` taken as [a][c][b].
std::function<float(int64_t)> swapped(const Tensor& t) {
  const auto& s = t.shape();
  const int64_t b = s[1], c = s[2];
  return [&t, b, c](int64_t idx) {
    const int64_t i = idx / (b * c), r = idx % (b * c), j = r / c, k = r % c;
    return t.get(i * b * c + k * b + j);
  };
}

// The columns [from, from + n) of a [rows][cols] field.
std::function<float(int64_t)> columns(const Tensor& t, int64_t from, int64_t n) {
  const int64_t cols = t.shape()[1];
  return [&t, from, n, cols](int64_t idx) { return t.get((idx / n) * cols + from + idx % n); };
}

// Whether it found one: a field one step off explains the rest of its difference (a conv window
// one token on is also the window shifted by a column), so no layout hint follows for it.
bool live_field_hints(const Tensor& got, const Tensor& ref, const std::optional<Tensor>& ref_ckpt,
                      const std::vector<Tensor>& ref_inter, const std::string& field, const std::string& at,
                      const OpView& v, std::vector<std::string>& out) {
  const double to_ref = rel_err(got, ref);
  if (to_ref == 0) return false;
  const size_t before = out.size();
  for (size_t t = 0; t < ref_inter.size(); ++t) {
    const std::string how = resemblance(rel_err(got, ref_inter[t]), to_ref);
    if (!how.empty())
      out.push_back(fmt::format("{}: {} equals the reference's {}_intermediate[{}] {} (all {}): {}", at, field, field,
                                t, how, elements(got), reading(v, int(t), field)));
  }
  if (ref_ckpt) {
    const std::string how = resemblance(rel_err(got, *ref_ckpt), to_ref);
    if (!how.empty())
      out.push_back(fmt::format("{}: {} equals the reference's {}_checkpoint {} (all {}): {}", at, field, field, how,
                                elements(got), reading(v, -1, field)));
  }
  return out.size() > before;
}

void layout_hints(const LayerState& g, const LayerState& r, bool h_explained, bool conv_explained,
                  const std::string& at, std::vector<std::string>& out) {
  // h transposed: [nv][vd][kd] written where the contract has [nv][kd][vd]
  const auto& s = r.h.shape();
  const double h_err = rel_err(g.h, r.h);
  if (!h_explained && h_err > 0 && s.size() == 3 && g.h.size() == r.h.size() && s[1] > 1 && s[2] > 1) {
    const std::string how = resemblance(rel_err(
                                            swapped(g.h), [&](int64_t i) { return r.h.get(i); }, r.h.size()),
                                        h_err);
    if (!how.empty())
      out.push_back(
          fmt::format("{}: h is the reference's h with its last two axes swapped {} (all {}): exported in the "
                      "transposed layout ([{}][{}][{}] kd fastest) without declaring it (SSMP_H_VD_KD, "
                      "h_layout = \"nv,vd,kd\")?",
                      at, how, elements(g.h), s[0], s[2], s[1]));
  }
  // the conv window shifted by a column
  const auto& cs = r.conv.shape();
  const double c_err = rel_err(g.conv, r.conv);
  if (!conv_explained && c_err > 0 && cs.size() == 2 && g.conv.size() == r.conv.size() && cs[1] > 1) {
    const int64_t n = cs[1] - 1, total = cs[0] * n;
    const double ahead = rel_err(columns(g.conv, 0, n), columns(r.conv, 1, n), total);
    const double behind = rel_err(columns(g.conv, 1, n), columns(r.conv, 0, n), total);
    if (const std::string how = resemblance(ahead, c_err); !how.empty())
      out.push_back(
          fmt::format("{}: conv column j equals the reference's column j+1 {} (columns 0..{} of {} channels): "
                      "the window shifted one column too far (shifted twice)?",
                      at, how, n - 1, cs[0]));
    if (const std::string how = resemblance(behind, c_err); !how.empty())
      out.push_back(
          fmt::format("{}: conv column j+1 equals the reference's column j {} (columns 1..{} of {} channels): "
                      "the window not shifted (the new column written over the newest)?",
                      at, how, n, cs[0]));
  }
  // FP16 stores: overflow to inf where the contract saturates, or the reverse
  if (g.h.dtype() == DType::f16 && r.h.dtype() == DType::f16 && g.h.size() == r.h.size() && h_err > 0) {
    int64_t inf_for_max = 0, max_for_inf = 0, other = 0;
    for (int64_t i = 0; i < g.h.size(); ++i) {
      const float x = g.h.get(i), y = r.h.get(i);
      if (x == y || (std::isnan(x) && std::isnan(y))) continue;
      if (std::isinf(x) && std::fabs(y) == kF16Max && std::signbit(x) == std::signbit(y)) ++inf_for_max;
      else if (std::isinf(y) && std::fabs(x) == kF16Max && std::signbit(x) == std::signbit(y)) ++max_for_inf;
      else ++other;
    }
    if (inf_for_max && !other)
      out.push_back(
          fmt::format("{}: h differs only where it is inf and the reference saturated at +-65504 ({} of {}): "
                      "FP16 stores overflow to inf (triton's or torch's conversion) where the contract clamps; "
                      "declare it (SSMP_F16_STORE_INF, f16_store = \"inf\") or judge with --f16-store inf?",
                      at, inf_for_max, elements(g.h)));
    if (max_for_inf && !other)
      out.push_back(
          fmt::format("{}: h differs only where it saturated at +-65504 and the reference is inf ({} of {}): "
                      "FP16 stores clamp where the model's overflow to inf (--f16-store inf)?",
                      at, max_for_inf, elements(g.h)));
  }
}

void intermediate_hints(const std::vector<Tensor>& got, const std::vector<Tensor>& ref, const std::string& field,
                        const std::string& at, std::vector<std::string>& out) {
  for (size_t t = 0; t < got.size() && t < ref.size(); ++t) {
    const double to_ref = rel_err(got[t], ref[t]);
    if (to_ref == 0) continue;
    for (size_t u : {t + 1, t - 1}) {
      if (u >= ref.size()) continue;  // (t - 1 wraps for t = 0)
      const std::string how = resemblance(rel_err(got[t], ref[u]), to_ref);
      if (!how.empty())
        out.push_back(
            fmt::format("{}: {}[{}] equals the reference's {}[{}] {}: the verify writes the state after row {} "
                        "into slot {} (intermediates one row off)?",
                        at, field, t, field, u, how, u, t));
    }
  }
}

void checkpoint_hints(const LayerState& g, const LayerState& r, const std::string& at, std::vector<std::string>& out) {
  if (!g.h_checkpoint || !r.h_checkpoint) return;
  const double to_ref = rel_err(*g.h_checkpoint, *r.h_checkpoint);
  if (to_ref == 0) return;
  const std::string how = resemblance(rel_err(*g.h_checkpoint, r.h), to_ref);
  if (!how.empty())
    out.push_back(
        fmt::format("{}: h_checkpoint equals the reference's live h {}: the checkpoint follows the live state "
                    "(the same buffer, or taken after the op instead of before)?",
                    at, how));
}

}  // namespace

std::vector<std::string> likely_causes(const SequenceState& ref, const SequenceState& got, const std::string& op_text) {
  std::vector<std::string> out;
  if (ref.layers.size() != got.layers.size()) return out;
  const OpView v(op_text);
  for (size_t l = 0; l < ref.layers.size(); ++l) {
    const LayerState& r = ref.layers[l];
    const LayerState& g = got.layers[l];
    const std::string at = fmt::format("layer {}", l);
    try {
      const bool h_off = live_field_hints(g.h, r.h, r.h_checkpoint, r.h_intermediates, "h", at, v, out);
      const bool full_conv = !g.conv_oldest_column_absent && !r.conv_oldest_column_absent;
      const bool conv_off =
          full_conv && live_field_hints(g.conv, r.conv, r.conv_checkpoint, r.conv_intermediates, "conv", at, v, out);
      layout_hints(g, r, h_off, conv_off || !full_conv, at, out);
      intermediate_hints(g.h_intermediates, r.h_intermediates, "h_intermediate", at, out);
      checkpoint_hints(g, r, at, out);
    } catch (const std::exception&) {
      // a field of an unexpected shape: no hint for it (the comparison already says what differs)
    }
  }
  return out;
}

std::string outranked_by_reruns(std::string report_text, size_t confirmed) {
  if (confirmed == 0) return report_text;
  const std::string from = "  likely cause: ", to = "  resembles (outranked by the cause a rerun confirmed): ";
  size_t at = 0;
  while ((at = report_text.find(from, at)) != std::string::npos) {
    if (at == 0 || report_text[at - 1] == '\n') {  // a line of its own, not a quote inside another
      report_text.replace(at, from.size(), to);
      at += to.size();
    } else {
      at += from.size();
    }
  }
  return report_text;
}

}  // namespace ssm::cmp
