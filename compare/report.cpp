// Mismatch reports: terminal text and JSON of TensorReport/StateReport (see compare.h).
// Never prints a whole tensor: counts, the worst few elements, a histogram, limits.
#include <cmath>
#include <fmt/core.h>

#include "compare/compare.h"

namespace ssm::cmp {

namespace {

// JSON has no inf/nan: write them as strings so CI tools see them.
nlohmann::json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::string g(double v) { return fmt::format("{:.9g}", v); }

std::string limits_text(TolClass c, const Tolerance& t, bool conditioned) {
  switch (c) {
    case TolClass::exact: return "identical bits";
    case TolClass::fp16_state:
      return fmt::format("max_ulp {:g} at max(|ref|, rms(ref)){}, max_nrmse {:g}", t.max_ulp,
                         t.atol > 0 || t.rtol > 0 ? fmt::format(" or |d| <= {:g} + {:g}*|ref|", t.atol, t.rtol) : "",
                         t.max_nrmse);
    case TolClass::fp32_state:
    case TolClass::output:
    case TolClass::output_f16:
      if (conditioned)
        return fmt::format("|d| <= {:g} + {:g}*|ref| + {:g}*u*cond, max_nrmse {:g} + {:g}*u*rms(cond)/rms(ref)", t.atol,
                           t.rtol, t.cond, t.max_nrmse, t.cond);
      return fmt::format("|d| <= {:g} + {:g}*|ref|, max_nrmse {:g}", t.atol, t.rtol, t.max_nrmse);
  }
  return "";
}

std::string bits_text(DType d, uint32_t bits) {
  return d == DType::f16 ? fmt::format("0x{:04x}", bits) : fmt::format("0x{:08x}", bits);
}

}  // namespace

std::string Where::text() const {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (op_index >= 0 || !op.empty())
    add(op_index >= 0 ? fmt::format("op {}{}", op_index, op.empty() ? "" : " '" + op + "'") : "op '" + op + "'");
  if (seq >= 0 || slot >= 0)
    add(seq >= 0 ? fmt::format("seq {}{}", seq, slot >= 0 ? fmt::format(" (slot {})", slot) : "")
                 : fmt::format("slot {}", slot));
  if (layer >= 0) add(fmt::format("layer {}", layer));
  if (!tensor.empty()) add(tensor);
  return s;
}

std::string TensorReport::text() const {
  std::string s = fmt::format("{} {} | {} | class {} ({})\n", pass ? "PASS" : "FAIL", where.text(),
                              shape.empty() ? "-" : shape, to_string(cls), limits_text(cls, tol, conditioned));
  if (!failure.empty()) s += "  reason: " + failure + "\n";
  if (overflow_boundary > 0)
    s += fmt::format("  FP16 overflow boundary: {} element{} inf on one side, the same-signed 65504 on the other "
                     "(a rounding across 65520; matched, one FP16 step)\n",
                     overflow_boundary, overflow_boundary > 1 ? "s" : "");
  if (measured) {
    s += fmt::format("  mismatched {} / {} ({:.4g}%); max abs {}, max rel {}, max ulp {:.0f}{}, nrmse {}\n", mismatched,
                     elements, elements ? 100.0 * double(mismatched) / double(elements) : 0.0, g(max_abs), g(max_rel),
                     max_ulp, cls == TolClass::fp16_state ? fmt::format(" (at scale {:.3g})", max_ulp_scaled) : "",
                     g(nrmse));
  }
  if (!worst.empty()) {
    std::string axes_text;
    for (size_t d = 0; d < axes.size(); ++d) axes_text += (d ? ", " : "") + axes[d];
    s += fmt::format("  worst elements ({}):\n", axes_text);
    for (const Element& e : worst) {
      std::string idx;
      for (size_t d = 0; d < e.index.size(); ++d) idx += (d ? ", " : "") + std::to_string(e.index[d]);
      s += fmt::format("    ({}): {} {} [{}] {} {} [{}] abs {} rel {} ulp {:.0f}{}\n", idx, where.ref_side, g(e.ref),
                       bits_text(dtype, e.ref_bits), where.got_side, g(e.got), bits_text(dtype, e.got_bits), g(e.abs_err),
                       g(e.rel_err), e.ulp,
                       cls == TolClass::fp16_state ? fmt::format(" (at scale {:.3g})", e.ulp_scaled) : "");
    }
  }
  bool any = false;
  std::string h;
  for (size_t b = 0; b < histogram.size(); ++b)
    if (histogram[b]) {
      h += fmt::format(" {}:{}", histogram_labels.at(b), histogram[b]);
      any = true;
    }
  if (any && measured && !pass)
    s += fmt::format("  histogram of {}:{}\n", cls == TolClass::exact ? "ulp distance" : cls == TolClass::fp16_state ? "ulps at scale" : "abs error", h);
  if (!pass && measured && !zero_ref) {
    switch (cls) {
      case TolClass::exact:
        s += "  smallest passing tolerance: none (class exact passes identical bits only)\n";
        break;
      case TolClass::fp16_state:
        s += fmt::format("  smallest passing tolerance: max_ulp >= {:g}, max_nrmse >= {}\n", smallest_passing.max_ulp,
                         g(smallest_passing.max_nrmse));
        break;
      default:
        s += fmt::format("  smallest passing tolerance: atol >= {} (rtol {:g}) or rtol >= {} (atol {:g}); "
                         "max_nrmse >= {}\n",
                         g(smallest_passing.atol), tol.rtol, g(smallest_passing.rtol), tol.atol,
                         g(smallest_passing.max_nrmse));
        if (conditioned)
          s += fmt::format("  condition: max |d| / (u*cond) = {} (class cond {:g}); nrmse judged against {}\n",
                           g(max_cond_ratio), tol.cond, g(nrmse_allowed));
    }
  }
  return s;
}

nlohmann::json TensorReport::json() const {
  nlohmann::json j;
  j["op_index"] = where.op_index;
  j["op"] = where.op;
  j["seq"] = where.seq;
  j["slot"] = where.slot;
  j["layer"] = where.layer;
  j["tensor"] = where.tensor;
  j["where"] = where.text();
  j["sides"] = {{"ref", where.ref_side}, {"got", where.got_side}};  // what "ref" and "got" below are
  j["class"] = to_string(cls);
  j["limits"] = {{"atol", num(tol.atol)}, {"rtol", num(tol.rtol)}, {"max_ulp", num(tol.max_ulp)},
                 {"max_nrmse", num(tol.max_nrmse)}, {"cond", num(tol.cond)}};
  j["conditioned"] = conditioned;
  j["non_finite_matched"] = non_finite_matched;
  j["overflow_boundary"] = overflow_boundary;
  if (conditioned) {
    j["max_cond_ratio"] = num(max_cond_ratio);
    j["nrmse_allowed"] = num(nrmse_allowed);
  }
  j["pass"] = pass;
  j["failure"] = failure;
  j["shape"] = shape;
  j["axes"] = axes;
  j["zero_ref"] = zero_ref;
  j["measured"] = measured;
  j["elements"] = elements;
  j["mismatched"] = mismatched;
  j["mismatched_pct"] = elements ? 100.0 * double(mismatched) / double(elements) : 0.0;
  j["above"] = above;
  j["below"] = below;
  j["max_abs"] = num(max_abs);
  j["max_rel"] = num(max_rel);
  j["max_ulp"] = num(max_ulp);
  j["max_ulp_scaled"] = num(max_ulp_scaled);
  j["nrmse"] = num(nrmse);
  j["worst"] = nlohmann::json::array();
  for (const Element& e : worst)
    j["worst"].push_back({{"index", e.index}, {"ref", num(e.ref)}, {"got", num(e.got)}, {"abs_err", num(e.abs_err)},
                          {"rel_err", num(e.rel_err)}, {"ulp", num(e.ulp)}, {"ulp_scaled", num(e.ulp_scaled)},
                          {"ref_bits", bits_text(dtype, e.ref_bits)}, {"got_bits", bits_text(dtype, e.got_bits)}});
  j["histogram"] = nlohmann::json::object();
  for (size_t b = 0; b < histogram.size() && b < histogram_labels.size(); ++b)
    j["histogram"][histogram_labels[b]] = histogram[b];
  j["histogram_of"] = cls == TolClass::exact ? "ulp" : cls == TolClass::fp16_state ? "ulp_scaled" : "abs_err";
  j["smallest_passing"] = {{"atol", num(smallest_passing.atol)}, {"rtol", num(smallest_passing.rtol)},
                           {"max_ulp", num(smallest_passing.max_ulp)},
                           {"max_nrmse", num(smallest_passing.max_nrmse)}};
  return j;
}

std::string StateReport::text() const {
  std::string s;
  for (const TensorReport& r : failures) s += r.text();
  for (const std::string& h : hints) s += "  likely cause: " + h + "\n";
  s += fmt::format("{}: {} tensors compared, {} failure{}\n", pass() ? "EQUAL within tolerance" : "DIFFERENT", tensors,
                   failures.size(), failures.size() == 1 ? "" : "s");
  return s;
}

nlohmann::json StateReport::json() const {
  nlohmann::json j;
  j["pass"] = pass();
  j["tensors"] = tensors;
  j["failures"] = nlohmann::json::array();
  for (const TensorReport& r : failures) j["failures"].push_back(r.json());
  j["hints"] = hints;
  return j;
}

void StateReport::add(TensorReport r) {
  margins.push_back(TensorMargin::of(r));
  if (!r.pass) failures.push_back(std::move(r));
}

void StateReport::merge(StateReport other) {
  tensors += other.tensors;
  for (auto& f : other.failures) failures.push_back(std::move(f));
  for (auto& m : other.margins) margins.push_back(std::move(m));
  for (auto& h : other.hints) hints.push_back(std::move(h));
}

TensorMargin TensorMargin::of(const TensorReport& r) {
  TensorMargin m;
  m.where = r.where;
  m.cls = r.cls;
  m.pass = r.pass;
  m.error_ratio = r.error_ratio;
  m.elements = r.elements;
  m.max_abs = r.max_abs;
  m.nrmse = r.nrmse;
  m.above = r.above;
  m.below = r.below;
  m.shape = r.shape;
  if (!r.pass) m.report = r.text();
  return m;
}

std::string TensorMargin::summary() const {
  if (!pass) return fmt::format("{} ({}): FAILED", where.text(), to_string(cls));
  if (cls == TolClass::exact)
    return fmt::format("{} {}, {} elements: every bit agrees (exact)", where.text(), shape, elements);
  return fmt::format("{} {}, {} elements, {}: max |d| {:.3g}, nrmse {:.3g}, {:.3g} of the tolerance", where.text(),
                     shape, elements, to_string(cls), max_abs, nrmse, error_ratio);
}

}  // namespace ssm::cmp
