// The plug-in ABI by name on the driving side (see named_abi.h).
#include "plugin/named_abi.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace ssm::plugin {

namespace {

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
// h, h_checkpoint, h_intermediate (not h_prefill_stage, which is of no layer)
bool h_like(const std::string& name) { return name == "h" || starts(name, "h_"); }
bool conv_like(const std::string& name) { return name == "conv" || starts(name, "conv_"); }

// Where the positional ssmp_state keeps a field's buffer t (nullptr past its room or without a carry),
// and its room of an indexed field.
void* buffer_of(const ssmp_layer_state& s, const ssmp_ple_state* p, const std::string& name, int t) {
  auto at = [t](auto* const* v, int room) -> void* { return t < room ? v[t] : nullptr; };
  if (name == "h") return s.h;
  if (name == "conv") return s.conv;
  if (name == "h_checkpoint") return s.h_checkpoint;
  if (name == "conv_checkpoint") return s.conv_checkpoint;
  if (name == "h_intermediate") return at(s.h_intermediates, s.h_intermediate_room);
  if (name == "conv_intermediate") return at(s.conv_intermediates, s.conv_intermediate_room);
  if (!p || !p->snapshots) return nullptr;
  const bool history = starts(name, "ple_history");
  auto part = [&](const ssmp_ple_carry& c) -> void* { return history ? c.history : c.conv; };
  if (name == "ple_history" || name == "ple_conv") return part(p->live);
  if (name == "ple_history_checkpoint" || name == "ple_conv_checkpoint") return part(p->checkpoint);
  if (name == "ple_history_snapshot" || name == "ple_conv_snapshot")
    return t < p->snapshot_room ? part(p->snapshots[t]) : nullptr;
  return nullptr;
}

int room_of(const ssmp_layer_state& s, const ssmp_ple_state* p, const std::string& name) {
  if (name == "h_intermediate") return s.h_intermediate_room;
  if (name == "conv_intermediate") return s.conv_intermediate_room;
  if (p && (name == "ple_history_snapshot" || name == "ple_conv_snapshot")) return p->snapshot_room;
  return 0;
}

bool same_description(const ssmp_field& a, const ssmp_field& b) {
  return a.name == b.name && a.layer == b.layer && a.index == b.index && a.rank == b.rank && a.data == b.data &&
         std::equal(a.dims, a.dims + 4, b.dims);
}

}  // namespace

LayerDescs::LayerDescs(const std::vector<LayerSpec>& layers, const WeightOf& weight_of) {
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSpec& s = layers[l];
    text_.push_back(layer_attrs(s));
    std::vector<ssmp_array> w;
    for (const WeightField& f : s.weights()) {
      ssmp_array a{f.name, int(f.shape.size()), {0, 0, 0, 0}, weight_of(l, f)};
      if (f.shape.size() > 4) throw std::logic_error(std::string("weight ") + f.name + " of rank > 4");
      std::copy(f.shape.begin(), f.shape.end(), a.dims);
      w.push_back(a);
    }
    weights_.push_back(std::move(w));
  }
  // pointers only once every vector has its place
  for (size_t l = 0; l < layers.size(); ++l) {
    std::vector<ssmp_attr> a;
    for (const LayerAttr& t : text_[l]) a.push_back({t.name.c_str(), t.value.c_str()});
    attrs_.push_back(std::move(a));
  }
  for (size_t l = 0; l < layers.size(); ++l)
    descs_.push_back({to_string(layers[l].kind), int(attrs_[l].size()), attrs_[l].data(), int(weights_[l].size()),
                      weights_[l].data()});
}

void RowsIo::clear() {
  inputs_.clear();
  outputs_.clear();
  io_.clear();
}

void RowsIo::add(const LayerSpec& s, const InputOf& input_of, float* out, float* ple_out) {
  ssmp_rows_io io{};
  for (const InputField& f : s.inputs()) {
    inputs_.push_back({f.name, f.width, input_of(f.member)});
    ++io.n_inputs;
  }
  for (const OutputField& f : s.outputs()) {
    outputs_.push_back({f.name, f.width, f.member == &StepOutputs::ple ? ple_out : out});
    ++io.n_outputs;
  }
  io_.push_back(io);
}

ssmp_rows_io* RowsIo::data() {
  size_t i = 0, o = 0;
  for (ssmp_rows_io& io : io_) {
    io.inputs = inputs_.data() + i;
    io.outputs = outputs_.data() + o;
    i += size_t(io.n_inputs);
    o += size_t(io.n_outputs);
  }
  return io_.data();
}

RowsIo::InputOf positional_input(const ssmp_layer_io& io, const ssmp_ple_io& ple) {
  return [io, ple](std::vector<float> LayerRows::*member) -> const float* {
    const std::pair<std::vector<float> LayerRows::*, const float*> given[] = {
        {&LayerRows::conv_in, io.x},          {&LayerRows::dt_in, io.a},
        {&LayerRows::beta_in, io.b},          {&LayerRows::gate_in, io.z},
        {&LayerRows::ple_tokens, ple.tokens}, {&LayerRows::ple_x, ple.x}};
    for (const auto& [m, p] : given)
      if (m == member) return p;
    return nullptr;
  };
}

void ExportFields::build(const std::vector<LayerSpec>& layers, const ssmp_state& st, const StateLayout& layout) {
  fields_.clear();
  auto add = [&](const char* name, int layer, int index, const std::vector<int64_t>& dims, void* data) {
    ssmp_field f{};
    f.name = name;
    f.layer = layer;
    f.index = index;
    f.rank = int(dims.size());
    std::copy(dims.begin(), dims.end(), f.dims);
    f.data = data;
    fields_.push_back(f);
  };
  for (size_t l = 0; l < layers.size() && int(l) < st.n_layers; ++l) {
    const LayerSpec& s = layers[l];
    const ssmp_layer_state& ls = st.layers[l];
    const ssmp_ple_state* ps = st.ple && s.ple.hosted() ? &st.ple[l] : nullptr;
    for (const StateField& f : s.state_fields()) {
      const std::vector<int64_t> dims = h_like(f.name)      ? h_shape_in(s, layout)
                                        : conv_like(f.name) ? conv_shape_in(s, layout)
                                                            : f.shape;
      const int count = f.indexed ? room_of(ls, ps, f.name) : 1;
      for (int t = 0; t < count; ++t)
        if (void* p = buffer_of(ls, ps, f.name, t)) add(f.name, int(l), f.indexed ? t : 0, dims, p);
    }
  }
  if (st.h_prefill_stage) add("h_prefill_stage", -1, 0, {st.stage_elems}, st.h_prefill_stage);
  given_ = fields_;
}

void ExportFields::apply(ssmp_state& st, int last_verify_k, const std::string& who) const {
  auto name_of = [](const ssmp_field& f) {
    const std::string n = f.name;
    const bool indexed = n.find("_intermediate") != std::string::npos || n.find("_snapshot") != std::string::npos;
    return (f.layer >= 0 ? "layer " + std::to_string(f.layer) + " " : std::string()) + "field " + n +
           (indexed ? " " + std::to_string(f.index) : "");
  };
  auto bad = [&](const ssmp_field& f, const std::string& what) {
    throw std::runtime_error(who + ": " + name_of(f) + ": " + what);
  };
  // per layer, per name: the answers by index
  struct Answer {
    const ssmp_field* field;
    bool present, f16;
  };
  std::vector<std::map<std::string, std::vector<Answer>>> per(size_t(std::max(st.n_layers, 0)));
  st.has_prefill_stage = 0;
  for (size_t i = 0; i < fields_.size(); ++i) {
    const ssmp_field& f = fields_[i];
    if (!same_description(f, given_[i]))
      bad(given_[i],
          "the plug-in changed the field's description (name, layer, index, rank, dims or buffer); "
          "it sets present and is_f16 only");
    const bool present = f.present != 0, f16 = f.is_f16 != 0;
    if (f16 && !h_like(f.name))
      bad(f, "is_f16 set, but only h, h_checkpoint and h_intermediate may be FP16 (binary16 bits)");
    if (f.layer < 0) {
      st.has_prefill_stage = present ? 1 : 0;
      continue;
    }
    per[size_t(f.layer)][f.name].push_back({&f, present, f16});
  }
  // the count of a field's leading present answers; none present after the first absent one, all alike
  auto count = [&](const std::vector<Answer>& v, bool* f16) {
    int n = 0;
    while (n < int(v.size()) && v[size_t(n)].present) ++n;
    for (size_t t = size_t(n); t < v.size(); ++t)
      if (v[t].present) bad(*v[t].field, "present, but index " + std::to_string(n) + " is not (they come in order)");
    for (int t = 1; t < n; ++t)
      if (v[size_t(t)].f16 != v[0].f16)
        bad(*v[size_t(t)].field, std::string("is_f16 ") + (v[size_t(t)].f16 ? "set" : "not set") +
                                     ", unlike index 0 (a verify's intermediates share one dtype)");
    if (f16) *f16 = n > 0 && v[0].f16;
    return n;
  };
  for (size_t l = 0; l < per.size(); ++l) {
    auto& m = per[l];
    ssmp_layer_state& s = st.layers[l];
    auto one = [&](const char* name) -> const Answer* {
      const auto it = m.find(name);
      return it == m.end() || it->second.empty() ? nullptr : &it->second[0];
    };
    auto required = [&](const char* name) {
      const Answer* a = one(name);
      if (!a) throw std::logic_error(who + ": layer " + std::to_string(l) + " has no field " + name);
      if (!a->present) bad(*a->field, "not present (a slot always holds it)");
      return a;
    };
    s.h_is_f16 = required("h")->f16;
    required("conv");
    if (const Answer* a = one("h_checkpoint")) s.has_h_checkpoint = a->present, s.h_checkpoint_is_f16 = a->f16;
    if (const Answer* a = one("conv_checkpoint")) s.has_conv_checkpoint = a->present;
    bool f16 = false;
    s.n_h_intermediates = count(m["h_intermediate"], &f16);
    s.h_intermediates_are_f16 = f16;
    s.n_conv_intermediates = count(m["conv_intermediate"], nullptr);
    if (!st.ple || m.find("ple_history") == m.end()) continue;
    ssmp_ple_state& p = st.ple[l];
    // a carry's history and conv come together
    auto pair = [&](const char* history, const char* conv) {
      const Answer *h = one(history), *c = one(conv);
      if (h && c && h->present != c->present)
        bad(*(h->present ? c : h)->field, "not present, but " + name_of(*(h->present ? h : c)->field) + " is");
      return h && h->present;
    };
    p.has_live = pair("ple_history", "ple_conv");
    p.has_checkpoint = pair("ple_history_checkpoint", "ple_conv_checkpoint");
    const int nh = count(m["ple_history_snapshot"], nullptr), nc = count(m["ple_conv_snapshot"], nullptr);
    if (nh != nc) {
      const auto& v = m[nh < nc ? "ple_history_snapshot" : "ple_conv_snapshot"];
      bad(*v[size_t(std::min(nh, nc))].field,
          "not present, but the carry's other part " + std::to_string(std::min(nh, nc)) + " is");
    }
    p.n_snapshots = nh;
  }
  st.last_verify_k = last_verify_k;
}

void ExportFields::mark(const ssmp_state& st) {
  for (ssmp_field& f : fields_) {
    const std::string n = f.name;
    bool present = false, f16 = false;
    if (f.layer < 0) {
      present = st.has_prefill_stage != 0;
    } else if (f.layer < st.n_layers) {
      const ssmp_layer_state& s = st.layers[f.layer];
      const ssmp_ple_state* p = st.ple ? &st.ple[f.layer] : nullptr;
      if (n == "h") present = true, f16 = s.h_is_f16 != 0;
      else if (n == "conv") present = true;
      else if (n == "h_checkpoint") present = s.has_h_checkpoint != 0, f16 = s.h_checkpoint_is_f16 != 0;
      else if (n == "conv_checkpoint") present = s.has_conv_checkpoint != 0;
      else if (n == "h_intermediate") present = f.index < s.n_h_intermediates, f16 = s.h_intermediates_are_f16 != 0;
      else if (n == "conv_intermediate") present = f.index < s.n_conv_intermediates;
      else if (p && (n == "ple_history" || n == "ple_conv")) present = p->has_live != 0;
      else if (p && (n == "ple_history_checkpoint" || n == "ple_conv_checkpoint")) present = p->has_checkpoint != 0;
      else if (p && (n == "ple_history_snapshot" || n == "ple_conv_snapshot")) present = f.index < p->n_snapshots;
    }
    f.present = present ? 1 : 0;
    f.is_f16 = present && f16 ? 1 : 0;
  }
}

}  // namespace ssm::plugin
