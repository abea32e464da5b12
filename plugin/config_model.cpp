// The model an ssmp_config describes (see config_model.h).
#include "plugin/config_model.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/layer_attrs.h"

namespace ssm::plugin {

Model model_of(const ssmp_config* c) {
  // an older ssmcheck's config ends before `mamba2` (and carries GDN layers only) or before `ple`
  if (c->struct_size < offsetof(ssmp_config, mamba2)) throw std::invalid_argument("ssmp_config from an older header");
  const ssmp_mamba2* mamba2 =
      covers(c->struct_size, offsetof(ssmp_config, mamba2), sizeof c->mamba2) ? c->mamba2 : nullptr;
  const ssmp_ple* ple = covers(c->struct_size, offsetof(ssmp_config, ple), sizeof c->ple) ? c->ple : nullptr;
  Model m;
  m.spec.name = c->model_name ? c->model_name : "";
  for (int l = 0; l < c->n_layers; ++l) {
    const ssmp_layer& L = c->layers[l];
    LayerSpec s;
    if (L.kind == SSMP_LAYER_MAMBA2) {
      if (!mamba2) throw std::invalid_argument("layer " + std::to_string(l) + ": Mamba-2 without ssmp_config.mamba2");
      const ssmp_mamba2& M = mamba2[l];
      s.kind = LayerKind::mamba2;
      s.nh = M.nh, s.hp = M.hp, s.ns = M.ns, s.ng = M.ng;
      s.norm_before_gate = M.norm_before_gate != 0;
      s.dt_min = M.dt_min, s.dt_max = M.dt_max;
    } else if (L.kind == SSMP_LAYER_GDN) {
      s.nk = L.nk, s.nv = L.nv, s.kd = L.kd, s.vd = L.vd;
      s.output_gate = L.sigmoid_gate ? OutputGate::sigmoid : OutputGate::silu;
    } else {
      throw std::invalid_argument("layer " + std::to_string(l) + ": unknown layer kind " + std::to_string(L.kind));
    }
    s.d_conv = L.d_conv;
    s.conv_bias = L.conv_bias != nullptr;
    s.eps = L.eps;
    if (ple && ple[l].channels != 0)
      s.ple = PleSpec{ple[l].channels, ple[l].ngram_size, ple[l].k_size, ple[l].dilation, ple[l].eos_id};
    s.validate();
    // where the ABI carries each weight; the kind's weights() say which it has and their shapes
    const std::pair<std::vector<float> LayerWeights::*, const float*> given[] = {
        {&LayerWeights::conv_w, L.conv_w}, {&LayerWeights::conv_bias, L.conv_bias},
        {&LayerWeights::A_log, L.A_log},   {&LayerWeights::dt_bias, L.dt_bias},
        {&LayerWeights::norm_w, L.norm_w}, {&LayerWeights::D, mamba2 ? mamba2[l].D : nullptr},
        {&LayerWeights::ple_w, ple ? ple[l].w : nullptr}};
    LayerWeights w;
    for (const WeightField& f : s.weights()) {
      const float* src = nullptr;
      for (const auto& [member, p] : given)
        if (member == f.member) src = p;
      if (!src) throw std::invalid_argument("layer " + std::to_string(l) + ": weight " + f.name + " is NULL");
      int64_t n = 1;
      for (int64_t d : f.shape) n *= d;
      (w.*f.member).assign(src, src + n);
    }
    m.spec.layers.push_back(s);
    m.weights.push_back(std::move(w));
  }
  return m;
}

bool has_layer_descs(const ssmp_config* c) {
  return covers(c->struct_size, offsetof(ssmp_config, layer_descs), sizeof c->layer_descs) && c->layer_descs;
}

Model model_of_descs(const ssmp_config* c) {
  if (!has_layer_descs(c))
    throw std::invalid_argument("ssmp_config has no layer_descs (an ssmcheck from before SSMP_BY_NAME)");
  Model m;
  m.spec.name = c->model_name ? c->model_name : "";
  for (int l = 0; l < c->n_layers; ++l) {
    const ssmp_layer_desc& d = c->layer_descs[l];
    const std::string at = "layer " + std::to_string(l);
    std::vector<LayerAttr> attrs;
    for (int i = 0; i < d.n_attrs; ++i) attrs.push_back({d.attrs[i].name, d.attrs[i].value});
    const LayerSpec s = layer_from_attrs(d.kind ? d.kind : "", attrs, at);
    const std::vector<WeightField> fields = s.weights();
    auto given = [&](const char* name) -> const ssmp_array* {
      for (int i = 0; i < d.n_weights; ++i)
        if (std::strcmp(d.weights[i].name, name) == 0) return &d.weights[i];
      return nullptr;
    };
    LayerWeights w;
    for (const WeightField& f : fields) {
      const ssmp_array* a = given(f.name);
      if (!a || !a->data) throw std::invalid_argument(at + ": weight " + f.name + " not given");
      if (a->rank != int(f.shape.size()) || !std::equal(f.shape.begin(), f.shape.end(), a->dims))
        throw std::invalid_argument(at + ": weight " + f.name + " is not of its shape");
      int64_t n = 1;
      for (int64_t dim : f.shape) n *= dim;
      (w.*f.member).assign(a->data, a->data + n);
    }
    for (int i = 0; i < d.n_weights; ++i)
      if (std::none_of(fields.begin(), fields.end(),
                       [&](const WeightField& f) { return std::strcmp(f.name, d.weights[i].name) == 0; }))
        throw std::invalid_argument(at + ": unknown weight '" + d.weights[i].name + "' of a " + d.kind + " layer");
    m.spec.layers.push_back(s);
    m.weights.push_back(std::move(w));
  }
  return m;
}

PoolConfig pool_of(const ssmp_config* c) {
  PoolConfig pool;
  pool.h_mode = c->h_mode == SSMP_H_F16 ? HMode::f16 : c->h_mode == SSMP_H_F16_POOL ? HMode::f16_pool : HMode::f32;
  pool.max_slots = c->max_slots;
  pool.h_capacity.assign(c->h_capacity, c->h_capacity + c->max_slots);
  pool.conv_capacity = c->conv_capacity;
  pool.snapshot_slots = c->snapshot_slots;
  return pool;
}

}  // namespace ssm::plugin
