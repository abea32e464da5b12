// Whole-sequence comparisons (see compare.h): every field of every layer under its class,
// flags, presence and counts as failures of their own, and per-layer outputs.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <fmt/core.h>

#include "compare/compare.h"
#include "compare/likely_cause.h"
#include "compare/field_cache.h"
#include "core/state_digest.h"

namespace ssm::cmp {

namespace {

// A failure that is not about tensor values: a flag, a presence or a count.
TensorReport flag_failure(const Where& base, int layer, const std::string& what, const std::string& text) {
  TensorReport r;
  r.where = base;
  r.where.layer = layer;
  r.where.tensor = what;
  r.cls = TolClass::exact;
  r.pass = false;
  r.failure = text;
  r.error_ratio = std::numeric_limits<double>::infinity();
  return r;
}

// The condition of a field, from whichever side computed one (the reference does: the model in
// the lockstep, the recomputation in `replay`), before it is broadcast to the field's shape.
const Tensor* condition_source(const Tensor* ref_cond, const Tensor* got_cond) {
  return ref_cond && ref_cond->size() > 0 ? ref_cond : got_cond && got_cond->size() > 0 ? got_cond : nullptr;
}

const Tensor* opt_ptr(const std::optional<Tensor>& t) { return t ? &*t : nullptr; }
const Tensor* at_ptr(const std::vector<Tensor>& v, size_t i) { return i < v.size() ? &v[i] : nullptr; }

// The reports of one state, in the order compare_state finds them. Tensor comparisons are
// queued and run by finish(), on several threads when the state is large (the fields are
// independent; each report is computed alone and added in order, so the result does not depend on
// the thread count). Queued work reads the tensors in place: they must live until finish().
class Reports {
 public:
  Reports(StateReport& rep, FieldCache* cache) : rep_(rep), cache_(cache) {}
  FieldCache* cache() const { return cache_; }
  void add(TensorReport r) {
    items_.push_back(Item{std::move(r), nullptr, false});
  }
  void add_comparison(std::function<TensorReport()> f, int64_t elems) {
    items_.push_back(Item{TensorReport{}, std::move(f), true});
    elems_ += elems;
  }
  void finish() {
    constexpr int64_t kParallelElems = int64_t(1) << 18;  // below, threads cost more than they save
    const int n = int(items_.size());
#pragma omp parallel for schedule(dynamic, 1) if (elems_ >= kParallelElems)
    for (int i = 0; i < n; ++i)
      if (items_[size_t(i)].run) items_[size_t(i)].report = items_[size_t(i)].run();
    for (Item& it : items_) {
      if (it.tensor) ++rep_.tensors;
      rep_.add(std::move(it.report));
    }
    items_.clear();
    if (cache_) cache_->end_comparison();
  }

 private:
  struct Item {
    TensorReport report;
    std::function<TensorReport()> run;  // null: report is ready
    bool tensor;                         // counts as a tensor compared
  };
  StateReport& rep_;
  FieldCache* cache_;
  std::vector<Item> items_;
  int64_t elems_ = 0;
};

void compare_field(Reports& rep, const Tensor& ref, const Tensor& got, const std::string& field,
                   const std::string& name, const Tolerances& tol, const Where& base, int layer, Strictness s,
                   bool lineage, const Tensor* ref_cond = nullptr, const Tensor* got_cond = nullptr) {
  Where w = base;
  w.layer = layer;
  w.tensor = name;
  const TolClass cls = class_of(field, ref.dtype(), s, lineage);
  FieldCache* cache = rep.cache();
  rep.add_comparison(
      [&ref, &got, &tol, w, cls, ref_cond, got_cond, cache] {
        const Tensor* c = condition_source(ref_cond, got_cond);
        FieldCache::Key key;
        if (cache) {
          key = FieldCache::Key{cache->ref_digest(ref), cache->got_digest(got), c ? tensor_digest(*c) : 0, cls};
          if (std::optional<TensorReport> r = cache->find(w.layer, w.tensor, key, w)) return std::move(*r);
        }
        // a per-column condition of an h-like field is read in place (compare_tensor)
        TensorReport r = compare_tensor(ref, got, cls, tol, w, /*allow_zero_ref=*/true, c);
        if (cache) cache->keep(w.layer, w.tensor, key, r);
        return r;
      },
      ref.size());
}

void compare_optional(Reports& rep, const std::optional<Tensor>& ref, const std::optional<Tensor>& got,
                      const std::string& field, const Tolerances& tol, const Where& base, int layer,
                      Strictness s, bool lineage, const Tensor* ref_cond = nullptr,
                      const Tensor* got_cond = nullptr) {
  if (ref.has_value() != got.has_value()) {
    rep.add(flag_failure(base, layer, field,
                                        fmt::format("{} present in {}: {}, in {}: {}", field, base.ref_side,
                                                    ref ? "yes" : "no", base.got_side, got ? "yes" : "no")));
    return;
  }
  if (ref) compare_field(rep, *ref, *got, field, field, tol, base, layer, s, lineage, ref_cond, got_cond);
}

std::string yes_no(bool b) { return b ? "true" : "false"; }

// A conv field [conv_dim][d_conv] without column 0 (the column a d_conv-1 window does not keep).
Tensor without_oldest_column(const Tensor& conv) {
  if (conv.shape().size() != 2 || conv.shape()[1] < 2) return conv;
  const int64_t C = conv.shape()[0], D = conv.shape()[1];
  Tensor t = Tensor::zeros(conv.dtype(), {C, D - 1});
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 1; j < D; ++j) {
      const int64_t from = c * D + j, to = c * (D - 1) + j - 1;
      if (conv.dtype() == DType::f32) t.f32()[to] = conv.f32()[from];
      else t.f16()[to] = conv.f16()[from];
    }
  return t;
}
std::optional<Tensor> without_oldest_column(const std::optional<Tensor>& t) {
  return t ? std::optional<Tensor>(without_oldest_column(*t)) : std::nullopt;
}
std::vector<Tensor> without_oldest_column(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(without_oldest_column(t));
  return out;
}

// The PLE carry (STATE-MODEL section 7): its presence, the live carry, the checkpoint's copy and
// the last verify's snapshots, every one exact.
void compare_ple(Reports& rep, const LayerState& a, const LayerState& b, const Tolerances& tol, const Where& base,
                 int l, Strictness s) {
  auto carry = [&](const PleCarry* ra, const PleCarry* rb, const std::string& field, const std::string& suffix) {
    if (bool(ra) != bool(rb)) {
      rep.add(flag_failure(base, l, field + suffix,
                           fmt::format("{}{} present in {}: {}, in {}: {} (the PLE carry is created on its first row "
                                       "and restored with the state)", field, suffix, base.ref_side,
                                       ra ? "yes" : "no", base.got_side, rb ? "yes" : "no")));
      return;
    }
    if (!ra) return;
    compare_field(rep, ra->history, rb->history, "ple_history", "ple_history" + suffix, tol, base, l, s, false);
    compare_field(rep, ra->conv, rb->conv, "ple_conv", "ple_conv" + suffix, tol, base, l, s, false);
  };
  auto ptr = [](const std::optional<PleCarry>& c) { return c ? &*c : nullptr; };
  carry(ptr(a.ple), ptr(b.ple), "ple", "");
  carry(ptr(a.ple_checkpoint), ptr(b.ple_checkpoint), "ple", "_checkpoint");
  if (a.ple_snapshots.size() != b.ple_snapshots.size())
    rep.add(flag_failure(base, l, "ple_snapshots",
                         fmt::format("number of valid ple_snapshots differs: {} {}, {} {}", base.ref_side,
                                     a.ple_snapshots.size(), base.got_side, b.ple_snapshots.size())));
  for (size_t t = 0; t < a.ple_snapshots.size() && t < b.ple_snapshots.size(); ++t)
    carry(&a.ple_snapshots[t], &b.ple_snapshots[t], "ple", fmt::format("_snapshot[{}]", t));
}

}  // namespace

StateReport compare_state(const SequenceState& ref, const SequenceState& got, const Tolerances& tol,
                          const Where& base_in, Strictness strictness, const FieldLineage& lineage,
                          FieldCache* cache) {
  StateReport out;
  Reports rep(out, cache);
  std::vector<std::unique_ptr<LayerState>> shortened;  // the queued comparisons read these until finish()
  Where base = base_in;
  if (base.slot < 0) base.slot = ref.slot;
  if (ref.last_verify_k != got.last_verify_k)
    rep.add(flag_failure(base, -1, "last_verify_k",
                                        fmt::format("last_verify_k differs: {} {}, {} {}", base.ref_side, ref.last_verify_k,
                                                    base.got_side, got.last_verify_k)));
  if (ref.layers.size() != got.layers.size()) {
    rep.add(flag_failure(base, -1, "layers",
                                        fmt::format("number of layers differs: {} {}, {} {}", base.ref_side, ref.layers.size(),
                                                    base.got_side, got.layers.size())));
    rep.finish();
    return out;
  }
  for (size_t li = 0; li < ref.layers.size(); ++li) {
    const int l = int(li);
    const LayerState* pa = &ref.layers[li];
    const LayerState* pb = &got.layers[li];
    if (pa->conv_oldest_column_absent || pb->conv_oldest_column_absent) {
      // copies only where a side keeps d_conv-1 columns: compare the columns both keep
      for (const LayerState** p : {&pa, &pb}) {
        shortened.push_back(std::make_unique<LayerState>(**p));
        LayerState& s = *shortened.back();
        s.conv = without_oldest_column(s.conv);
        s.conv_checkpoint = without_oldest_column(s.conv_checkpoint);
        s.conv_intermediates = without_oldest_column(s.conv_intermediates);
        *p = &s;
      }
    }
    const LayerState& a = *pa;
    const LayerState& b = *pb;
    if (a.h_is_f16 != b.h_is_f16)
      rep.add(flag_failure(base, l, "h_is_f16",
                                          fmt::format("h_is_f16 differs: {} {}, {} {} (FP16 bytes read as FP32 "
                                                      "or the reverse)", base.ref_side, yes_no(a.h_is_f16),
                                                      base.got_side, yes_no(b.h_is_f16))));
    compare_field(rep, a.h, b.h, "h", "h", tol, base, l, strictness, lineage.h, opt_ptr(a.condition.h),
                  opt_ptr(b.condition.h));
    compare_field(rep, a.conv, b.conv, "conv", "conv", tol, base, l, strictness, false);
    compare_optional(rep, a.h_checkpoint, b.h_checkpoint, "h_checkpoint", tol, base, l, strictness,
                     lineage.h_checkpoint, opt_ptr(a.condition.h_checkpoint), opt_ptr(b.condition.h_checkpoint));
    compare_optional(rep, a.conv_checkpoint, b.conv_checkpoint, "conv_checkpoint", tol, base, l, strictness, false);
    auto intermediates = [&](const std::vector<Tensor>& ra, const std::vector<Tensor>& rb, const std::string& field,
                             bool from_f16, const std::vector<Tensor>& ca, const std::vector<Tensor>& cb) {
      if (ra.size() != rb.size())
        rep.add(flag_failure(base, l, field + "s",
                                            fmt::format("number of valid {}s differs: {} {}, {} {}", field,
                                                        base.ref_side, ra.size(), base.got_side, rb.size())));
      for (size_t t = 0; t < ra.size() && t < rb.size(); ++t)
        compare_field(rep, ra[t], rb[t], field, fmt::format("{}[{}]", field, t), tol, base, l, strictness, from_f16,
                      at_ptr(ca, t), at_ptr(cb, t));
    };
    intermediates(a.h_intermediates, b.h_intermediates, "h_intermediate", lineage.intermediates,
                  a.condition.h_intermediates, b.condition.h_intermediates);
    intermediates(a.conv_intermediates, b.conv_intermediates, "conv_intermediate", false, {}, {});
    compare_ple(rep, a, b, tol, base, l, strictness);
  }
  if (!ref.prefill_stage_absent && !got.prefill_stage_absent)
    compare_optional(rep, ref.h_prefill_stage, got.h_prefill_stage, "h_prefill_stage", tol, base, -1, strictness,
                     lineage.stage, opt_ptr(ref.h_prefill_stage_condition), opt_ptr(got.h_prefill_stage_condition));
  rep.finish();
  if (!out.pass()) out.hints = likely_causes(ref, got, base.op);
  return out;
}

namespace {

// One output tensor of one layer ("output" [rows][heads][head dim] or "ple_output" [rows][C]).
void compare_output(StateReport& rep, const std::string& tensor, const std::vector<int64_t>& shape,
                    const std::vector<float>& ref, const std::vector<float>& got,
                    const std::vector<std::vector<float>>& ref_cond, const std::vector<std::vector<float>>& got_cond,
                    size_t l, const Tolerances& tol, const Where& base, Strictness strictness, bool fp16_lineage) {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  if (ref.size() != n || got.size() != n) {
    rep.add(flag_failure(base, int(l), tensor,
                         fmt::format("{} size: {} {}, {} {}, expected {} = {} rows x {}", tensor, base.ref_side,
                                     ref.size(), base.got_side, got.size(), n, shape[0], n / size_t(shape[0]))));
    return;
  }
  Tensor tr = Tensor::zeros(DType::f32, shape), tg = Tensor::zeros(DType::f32, shape);
  std::memcpy(tr.f32(), ref.data(), n * 4);
  std::memcpy(tg.f32(), got.data(), n * 4);
  // The condition of the computation, from whichever side computed one (ssmcheck's reference
  // does; in the lockstep it is the model, in `replay` the recomputation of the trace): it
  // bounds how sensitive the exact value is, whichever side is under test.
  const std::vector<float>* cv = nullptr;
  if (l < ref_cond.size() && ref_cond[l].size() == n) cv = &ref_cond[l];
  else if (l < got_cond.size() && got_cond[l].size() == n) cv = &got_cond[l];
  std::optional<Tensor> cond;
  if (cv) {
    cond = Tensor::zeros(DType::f32, shape);
    std::memcpy(cond->f32(), cv->data(), n * 4);
  }
  Where w = base;
  w.layer = int(l);
  w.tensor = tensor;
  ++rep.tensors;
  // An all-zero reference output fails (nothing passes vacuously) unless got is bit for bit
  // identical (compare_tensor: no tolerance is used) or the model certifies it with its condition: an all-zero condition (state and values exactly zero: silu of a large
  // negative input underflows to 0; a norm over an infinite element scales the finite ones to 0),
  // nothing an implementation could round, or a condition C with u C below FP32's normal range
  // (C bounds the value's own magnitude too, so the value lives at the bottom of FP32's range,
  // where every term underflows: reference/underflow.h). Got must then be zero within the class's
  // condition term cond u C (exactly zero for the first). Non-finite reference elements are
  // judged on their own (compare_tensor: the same non-finite value on both sides).
  const TolClass cls = class_of(tensor, DType::f32, strictness, fp16_lineage);
  bool certified_zero = cond.has_value();
  for (size_t i = 0; certified_zero && i < n; ++i) {
    const float c = (*cv)[i];
    certified_zero = !std::isfinite(ref[i]) ||
                     (ref[i] == 0.0f && (c == 0.0f || (cls != TolClass::exact && kUnitRoundoffF32 * c < FLT_MIN)));
  }
  TensorReport r = compare_tensor(tr, tg, cls, tol, w, certified_zero, cond ? &*cond : nullptr);
  rep.add(std::move(r));
}

}  // namespace

StateReport compare_outputs(const ModelSpec& spec, const StepOutputs& ref, const StepOutputs& got,
                            const Tolerances& tol, const Where& base, Strictness strictness,
                            bool fp16_lineage) {
  StateReport rep;
  if (ref.rows != got.rows) {
    rep.add(flag_failure(base, -1, "output",
                         fmt::format("output rows differ: {} {}, {} {}", base.ref_side, ref.rows, base.got_side, got.rows)));
    return rep;
  }
  const size_t L = spec.layers.size();
  if (ref.layers.size() != L || got.layers.size() != L) {
    rep.add(flag_failure(base, -1, "output",
                         fmt::format("output layers: {} {}, {} {}, model {}", base.ref_side, ref.layers.size(),
                                     base.got_side, got.layers.size(), L)));
    return rep;
  }
  static const std::vector<float> kNone;
  for (size_t l = 0; l < L; ++l) {
    const LayerSpec& s = spec.layers[l];
    compare_output(rep, "output", {ref.rows, s.out_heads(), s.out_head_dim()}, ref.layers[l], got.layers[l],
                   ref.condition, got.condition, l, tol, base, strictness, fp16_lineage);
    // the PLE output is FP32 whatever h is: no FP16 lineage
    if (s.ple.hosted())
      compare_output(rep, "ple_output", {ref.rows, s.ple.channels}, l < ref.ple.size() ? ref.ple[l] : kNone,
                     l < got.ple.size() ? got.ple[l] : kNone, ref.ple_condition, got.ple_condition, l, tol, base,
                     strictness, false);
  }
  return rep;
}

FieldLineage assumed_lineage(HMode mode) {
  const bool f16 = mode != HMode::f32;
  return FieldLineage{f16, f16, f16, f16, true};
}

}  // namespace ssm::cmp
