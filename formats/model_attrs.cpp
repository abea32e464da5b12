// The pool and layer-spec attributes that dumps and traces share (see model_attrs.h).
#include "formats/model_attrs.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/core.h>
#include <functional>
#include <vector>

#include "core/conventions.h"
#include "core/layer_attrs.h"
#include "formats/format_error.h"
#include "formats/hdf5_file.h"

namespace ssm::formats {

namespace {
// The attributes of a layer's conventions (core/conventions.h's numerics), for the hint that says
// where one put on another group belongs.
bool is_layer_convention(const std::string& name) {
  return name == "gates" || name == "f16_store" || name == "f16_rows";
}

std::vector<std::string> attribute_names(hid_t loc) {
  std::vector<std::string> names;
  struct Collect {
    static herr_t add(hid_t, const char* name, const H5A_info_t*, void* out) {
      if (!name || std::strlen(name) > 4096) return -1;
      static_cast<std::vector<std::string>*>(out)->emplace_back(name);
      return 0;
    }
  };
  hsize_t idx = 0;
  if (H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &idx, &Collect::add, &names) < 0)
    throw h5::Error("unreadable attribute names: " + h5::error_stack());
  return names;
}

// A shape of one layer kind and its counterpart of the other (GDN key heads and Mamba-2 groups,
// value heads and heads, the key dim and the state size (B and C's width), the value dim and the
// head dim (x's width)): what "did you mean" offers for an attribute of the other kind.
constexpr std::pair<const char*, const char*> kShapeCounterparts[] = {
    {"nk", "ng"}, {"nv", "nh"}, {"kd", "ns"}, {"vd", "hp"}};

// For an attribute a layer of `kind` does not define but the other kind does: "; ng is a mamba2
// layer's attribute and this layer is gdn: did you mean nk?" ("" when it is none).
std::string other_kind_note(const std::string& n, LayerKind kind) {
  const LayerKind other = kind == LayerKind::gdn ? LayerKind::mamba2 : LayerKind::gdn;
  const std::vector<std::string> theirs = layer_spec_attr_names(other);
  if (std::find(theirs.begin(), theirs.end(), n) == theirs.end()) return "";
  std::string note =
      fmt::format("; {} is a {} layer's attribute and this layer is {}", n, to_string(other), to_string(kind));
  for (const auto& [gdn, mamba2] : kShapeCounterparts) {
    const std::string mine = kind == LayerKind::gdn ? gdn : mamba2, its = kind == LayerKind::gdn ? mamba2 : gdn;
    if (n == its) return note + ": did you mean " + mine + "?";
  }
  return note + " (no " + to_string(kind) + " counterpart)";
}

void only_attrs(const CheckedReader& r, hid_t loc, const std::string& path, const std::vector<std::string>& defined,
                const std::function<std::string(const std::string&)>& note) {
  for (const std::string& n : r.guard(path, [&] { return attribute_names(loc); })) {
    if (std::find(defined.begin(), defined.end(), n) != defined.end()) continue;
    std::string list, near;
    for (const std::string& d : defined) {
      list += (list.empty() ? "" : ", ") + d;
      if (near.empty() && near_miss(n, d)) near = d;
    }
    std::string what = "not a member of " + path + " (defined: " + (list.empty() ? "no attributes" : list) + ")";
    const std::string kind_note = note ? note(n) : "";
    if (!kind_note.empty()) what += kind_note;
    else if (!near.empty()) what += "; did you mean " + near + "?";
    else if (is_layer_convention(n)) what += "; " + n + " is a layer's convention: it belongs on /model/layer<l>";
    throw FormatError(r.file(), CheckedReader::at(path, n), what);
  }
}

}  // namespace

std::vector<std::string> layer_spec_attr_names(LayerKind kind) {
  // core's names (core/layer_attrs.h), with the group's kind first and its informational name after eps
  std::vector<std::string> v = {"kind"};
  for (const std::string& n : layer_attr_names(kind)) {
    v.push_back(n);
    if (n == "eps") v.push_back("name");
  }
  return v;
}

const std::vector<std::string>& pool_attr_names() {
  static const std::vector<std::string> names = {"max_slots", "h_capacity", "conv_capacity", "snapshot_slots"};
  return names;
}

void only_attrs(const CheckedReader& r, hid_t loc, const std::string& path, const std::vector<std::string>& defined) {
  only_attrs(r, loc, path, defined, nullptr);
}

void write_pool_attrs(hid_t g, const PoolConfig& pool) {
  h5::write_attr_i64(g, "max_slots", pool.max_slots);
  std::vector<int64_t> caps;
  for (int s = 0; s < pool.max_slots; ++s) caps.push_back(pool.capacity(s));
  if (!caps.empty()) h5::write_attr_i64s(g, "h_capacity", caps);
  h5::write_attr_i64(g, "conv_capacity", pool.conv_capacity);
  h5::write_attr_i64(g, "snapshot_slots", pool.snapshot_slots);
}

HMode read_h_mode_attr(const CheckedReader& r, hid_t f) {
  const std::string mode = r.str_attr(f, "/", "h_mode");
  try {
    return parse_h_mode(mode);
  } catch (const std::exception& e) {
    throw FormatError(r.file(), "/@h_mode", e.what());
  }
}

void read_pool_attrs(const CheckedReader& r, hid_t g, PoolConfig& pool) {
  only_attrs(r, g, "/pool", pool_attr_names());
  pool.max_slots = int(r.int_attr(g, "/pool", "max_slots", 1, kMaxSlots));
  pool.conv_capacity = int(r.int_attr(g, "/pool", "conv_capacity", 0, kMaxK));
  pool.snapshot_slots = int(r.int_attr(g, "/pool", "snapshot_slots", 0, kMaxSlots));
  const auto caps = r.guard("/pool@h_capacity", [&] { return h5::read_attr_ints(g, "h_capacity"); });
  if (caps.size() != size_t(pool.max_slots))
    throw FormatError(r.file(), "/pool@h_capacity",
                      fmt::format("{} entries for {} slots", caps.size(), pool.max_slots));
  pool.h_capacity.clear();
  for (int64_t c : caps) {
    if (c < 0 || c > kMaxK) throw FormatError(r.file(), "/pool@h_capacity", fmt::format("bad capacity {}", c));
    pool.h_capacity.push_back(int(c));
  }
}

void write_layer_spec_attrs(hid_t g, const LayerSpec& s) {
  h5::write_attr_str(g, "kind", to_string(s.kind));
  for (const LayerAttr& a : layer_attrs(s)) {  // core/layer_attrs.h: the names, values and types
    switch (layer_attr_type(a.name)) {
      case AttrType::integer: h5::write_attr_i64(g, a.name, std::stoll(a.value)); break;
      case AttrType::real: {
        float x = 0;  // the shortest text of x, or inf (from_chars: no locale)
        std::from_chars(a.value.data(), a.value.data() + a.value.size(), x);
        h5::write_attr_f32(g, a.name, x);
        break;
      }
      case AttrType::text: h5::write_attr_str(g, a.name, a.value); break;
    }
  }
  h5::write_attr_str(g, "name", s.name());
}

LayerSpec read_layer_spec_attrs(const CheckedReader& r, hid_t g, const std::string& lp, bool output_gate_optional) {
  const std::string kind = r.str_attr(g, lp, "kind");
  LayerKind k;
  try {
    k = parse_layer_kind(kind);
  } catch (const std::invalid_argument& e) {
    throw FormatError(r.file(), lp + "@kind", e.what());
  }
  only_attrs(r, g, lp, layer_spec_attr_names(k), [&](const std::string& n) { return other_kind_note(n, k); });
  // each attribute core knows, as its text (core/layer_attrs.h reads, checks and defaults them)
  std::vector<LayerAttr> attrs;
  for (const std::string& name : layer_attr_names(k)) {
    // a dump's GDN layers carry output_gate (optional in traces: absent means silu)
    const bool required = !output_gate_optional && name == "output_gate";
    if (!required && !r.has_attr(g, lp, name)) continue;
    const std::string at = CheckedReader::at(lp, name);
    switch (layer_attr_type(name)) {
      case AttrType::integer:
        attrs.push_back({name, std::to_string(r.guard(at, [&] { return h5::read_attr_int(g, name); }))});
        break;
      case AttrType::real:
        attrs.push_back({name, layer_attr_text(float(r.guard(at, [&] { return h5::read_attr_float(g, name); })))});
        break;
      case AttrType::text: attrs.push_back({name, r.str_attr(g, lp, name)}); break;
    }
  }
  LayerSpec s;
  try {
    s = layer_from_attrs(kind, attrs, "");
  } catch (const LayerAttrError& e) {
    throw FormatError(r.file(), e.attr().empty() ? lp : CheckedReader::at(lp, e.attr()), e.detail());
  }
  if (s.h_elems() > kMaxElems || s.conv_elems() > kMaxElems) throw FormatError(r.file(), lp, "layer too large");
  return s;
}

}  // namespace ssm::formats
