// A layer described by named attributes, as text (see layer_attrs.h).
#include "core/layer_attrs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "core/conventions.h"

namespace ssm {

namespace {

enum class Need { required, optional };

// One attribute: who carries it, whether it must be given, and how it reads and writes.
struct Attr {
  const char* name;
  bool gdn, mamba2;  // the kinds that carry it
  Need need;
  AttrType type;
  std::function<std::string(const LayerSpec&)> get;         // "" when it is its default (not written)
  std::function<void(LayerSpec&, const std::string&)> set;  // throws std::invalid_argument (the value only)
};

int parse_int(const std::string& v, long long lo, long long hi) {
  long long x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size()) throw std::invalid_argument("'" + v + "' is not an integer");
  if (x < lo || x > hi)
    throw std::invalid_argument("value " + v + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return int(x);
}

float parse_float(const std::string& v) {
  if (v == "inf" || v == "+inf") return std::numeric_limits<float>::infinity();
  float x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || std::isnan(x))
    throw std::invalid_argument("'" + v + "' is not a number");
  return x;
}

std::string text(float x) { return layer_attr_text(x); }

std::string text(int x) { return std::to_string(x); }

Attr int_attr(const char* name, bool gdn, bool mamba2, Need need, int LayerSpec::*m, long long lo, long long hi,
              int default_value = 0) {
  return {name,
          gdn,
          mamba2,
          need,
          AttrType::integer,
          [=](const LayerSpec& s) { return need == Need::optional && s.*m == default_value ? "" : text(s.*m); },
          [=](LayerSpec& s, const std::string& v) { s.*m = parse_int(v, lo, hi); }};
}

Attr flag_attr(const char* name, bool gdn, bool mamba2, Need need, bool LayerSpec::*m) {
  return {name,
          gdn,
          mamba2,
          need,
          AttrType::integer,
          [=](const LayerSpec& s) { return need == Need::optional && !(s.*m) ? "" : text(s.*m ? 1 : 0); },
          [=](LayerSpec& s, const std::string& v) { s.*m = parse_int(v, 0, 1) != 0; }};
}

// A convention of the numerics (or norm_groups), through core/conventions.h's names and parsers.
Attr convention_attr(const char* name, bool gdn, bool mamba2, AttrType type,
                     std::function<std::string(const LayerSpec&)> get) {
  return {name, gdn, mamba2, Need::optional, type, std::move(get), [=](LayerSpec& s, const std::string& v) {
            StateLayout unused;
            set_convention(s, unused, name, v);
          }};
}

const std::vector<Attr>& table() {
  static const std::vector<Attr> t = [] {
    std::vector<Attr> a;
    for (LayerKind k : {LayerKind::gdn, LayerKind::mamba2}) {
      LayerSpec s;
      s.kind = k;
      for (const ShapeParam& p : s.shape_params())
        a.push_back(
            int_attr(p.name, k == LayerKind::gdn, k == LayerKind::mamba2, Need::required, p.member, 1, kMaxHeads));
    }
    a.push_back(int_attr("d_conv", true, true, Need::required, &LayerSpec::d_conv, 1, kMaxHeads));
    a.push_back(flag_attr("conv_bias", true, true, Need::required, &LayerSpec::conv_bias));
    // written always (dumps before version 1's traces required it), given or not
    a.push_back({"output_gate", true, false, Need::optional, AttrType::text,
                 [](const LayerSpec& s) { return std::string(to_string(s.output_gate)); },
                 [](LayerSpec& s, const std::string& v) {
                   if (v == "silu") s.output_gate = OutputGate::silu;
                   else if (v == "sigmoid") s.output_gate = OutputGate::sigmoid;
                   else throw std::invalid_argument("'" + v + "': expected silu or sigmoid");
                 }});
    a.push_back(flag_attr("norm_before_gate", false, true, Need::optional, &LayerSpec::norm_before_gate));
    a.push_back(convention_attr("norm_groups", false, true, AttrType::integer,
                                [](const LayerSpec& s) { return s.norm_groups ? text(s.norm_groups) : ""; }));
    for (auto [name, m, dflt] : {std::tuple{"dt_min", &LayerSpec::dt_min, 0.0f},
                                 std::tuple{"dt_max", &LayerSpec::dt_max, std::numeric_limits<float>::infinity()}})
      a.push_back({name, false, true, Need::optional, AttrType::real,
                   [m = m, dflt = dflt](const LayerSpec& s) { return s.*m == dflt ? "" : text(s.*m); },
                   [m = m](LayerSpec& s, const std::string& v) {
                     const float x = parse_float(v);
                     if (!(x >= 0)) throw std::invalid_argument("'" + v + "' must be >= 0");
                     s.*m = x;
                   }});
    a.push_back(convention_attr("gates", true, true, AttrType::text, [](const LayerSpec& s) {
      return s.numerics.gates == GateMath::clamped ? "" : to_string(s.numerics.gates);
    }));
    a.push_back(convention_attr("f16_store", true, true, AttrType::text, [](const LayerSpec& s) {
      return s.numerics.f16_store == F16Store::saturate ? "" : to_string(s.numerics.f16_store);
    }));
    a.push_back(convention_attr("f16_rows", true, true, AttrType::text, [](const LayerSpec& s) {
      return s.numerics.f16_rows == F16Rows::stored ? "" : to_string(s.numerics.f16_rows);
    }));
    a.push_back({"eps", true, true, Need::required, AttrType::real, [](const LayerSpec& s) { return text(s.eps); },
                 [](LayerSpec& s, const std::string& v) {
                   const float x = parse_float(v);
                   if (!(x > 0) || !std::isfinite(x)) throw std::invalid_argument("'" + v + "' must be finite and > 0");
                   s.eps = x;
                 }});
    for (const auto& [name, member] : ple_attr_members())
      a.push_back({name, true, false, Need::optional, AttrType::integer,
                   [m = member](const LayerSpec& s) { return s.ple.hosted() ? text(s.ple.*m) : ""; },
                   [m = member](LayerSpec& s, const std::string& v) { s.ple.*m = parse_int(v, 0, kMaxTokenId); }});
    return a;
  }();
  return t;
}

bool carried_by(const Attr& a, LayerKind k) { return k == LayerKind::gdn ? a.gdn : a.mamba2; }

bool is_ple(const std::string& name) { return name.rfind("ple_", 0) == 0; }

}  // namespace

const std::vector<std::pair<const char*, int PleSpec::*>>& ple_attr_members() {
  static const std::vector<std::pair<const char*, int PleSpec::*>> m = {{"ple_channels", &PleSpec::channels},
                                                                        {"ple_ngram_size", &PleSpec::ngram_size},
                                                                        {"ple_k_size", &PleSpec::k_size},
                                                                        {"ple_dilation", &PleSpec::dilation},
                                                                        {"ple_eos_id", &PleSpec::eos_id}};
  return m;
}

std::string layer_attr_text(float x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (std::isnan(x)) return "nan";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // the shortest text that reads back as x
  return std::string(buf, r.ptr);
}

AttrType layer_attr_type(const std::string& name) {
  for (const Attr& a : table())
    if (name == a.name) return a.type;
  throw std::invalid_argument("'" + name + "' is not a layer attribute");
}

std::vector<std::string> layer_attr_names(LayerKind kind) {
  std::vector<std::string> v;
  for (const Attr& a : table())
    if (carried_by(a, kind)) v.push_back(a.name);
  return v;
}

std::vector<LayerAttr> layer_attrs(const LayerSpec& s) {
  std::vector<LayerAttr> v;
  for (const Attr& a : table()) {
    if (!carried_by(a, s.kind)) continue;
    std::string value = a.get(s);
    if (!value.empty()) v.push_back({a.name, std::move(value)});
  }
  return v;
}

LayerSpec layer_from_attrs(const std::string& kind, const std::vector<LayerAttr>& attrs, const std::string& where) {
  const std::string at = where.empty() ? "" : where + ": ";
  // what() is `at` + the message; the attribute and the detail apart (LayerAttrError)
  const auto fail = [&](const std::string& message, const std::string& attr, const std::string& detail) {
    return LayerAttrError(at + message, attr, detail);
  };
  LayerSpec s;
  try {
    s.kind = parse_layer_kind(kind);
  } catch (const std::invalid_argument& e) {
    throw fail(std::string("kind: ") + e.what(), "kind", e.what());
  }
  const std::vector<std::string> names = layer_attr_names(s.kind);
  std::vector<std::string> given;
  int ple_given = 0;
  for (const LayerAttr& g : attrs) {
    const auto it = std::find_if(table().begin(), table().end(), [&](const Attr& a) { return g.name == a.name; });
    if (it == table().end() || !carried_by(*it, s.kind)) {
      std::string list, near;
      for (const std::string& n : names) {
        list += (list.empty() ? "" : ", ") + n;
        if (near.empty() && near_miss(g.name, n)) near = n;
      }
      std::string what =
          "'" + g.name + "' is not an attribute of a " + to_string(s.kind) + " layer (defined: " + list + ")";
      if (it != table().end())
        what += "; it is a " + std::string(s.kind == LayerKind::gdn ? "mamba2" : "gdn") + " layer's";
      else if (!near.empty()) what += "; did you mean " + near + "?";
      throw fail(what, "", what);
    }
    if (std::find(given.begin(), given.end(), g.name) != given.end())
      throw fail("'" + g.name + "' is given twice", g.name, "is given twice");
    given.push_back(g.name);
    try {
      it->set(s, g.value);
    } catch (const std::invalid_argument& e) {
      throw fail(g.name + ": " + e.what(), g.name, e.what());
    }
    if (is_ple(g.name)) ++ple_given;
  }
  for (const Attr& a : table())
    if (carried_by(a, s.kind) && a.need == Need::required &&
        std::find(given.begin(), given.end(), a.name) == given.end())
      throw fail("'" + std::string(a.name) + "' is required for a " + to_string(s.kind) + " layer", a.name,
                 std::string("missing: it is required for a ") + to_string(s.kind) + " layer");
  const int ple_all = int(ple_attr_members().size());
  if (ple_given != 0 && ple_given != ple_all) {
    std::string missing;
    for (const auto& [name, member] : ple_attr_members())
      if (std::find(given.begin(), given.end(), name) == given.end())
        missing += (missing.empty() ? "" : ", ") + std::string(name);
    const std::string what = "a PLE carry needs all of its geometry: missing " + missing;
    throw fail(what, "", what);
  }
  if (ple_given == ple_all && s.ple.channels == 0)
    throw fail("ple_channels: 0 hosts no carry (leave the ple_ attributes out)", "ple_channels",
               "0 hosts no carry (leave the ple_ attributes out)");
  try {
    s.validate();
  } catch (const std::invalid_argument& e) {
    throw fail(e.what(), "", e.what());
  }
  return s;
}

}  // namespace ssm
