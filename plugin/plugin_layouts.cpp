// The plug-in ABI's C layouts from and to the contract's (see plugin_layouts.h).
#include "plugin/plugin_layouts.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/conventions.h"
#include "core/state.h"

namespace ssm::plugin {

namespace {

ssmp_h_mode h_mode_of(HMode m) {
  switch (m) {
    case HMode::f32: return SSMP_H_F32;
    case HMode::f16: return SSMP_H_F16;
    case HMode::f16_pool: return SSMP_H_F16_POOL;
  }
  return SSMP_H_F32;
}

Tensor tensor(const void* p, bool f16, std::vector<int64_t> shape) {
  Tensor t = Tensor::zeros(f16 ? DType::f16 : DType::f32, std::move(shape));
  std::memcpy(t.raw(), p, t.bytes());
  return t;
}

}  // namespace

PluginConfig::PluginConfig(const Model& model, const PoolConfig& pool)
    : mamba2_(model.spec.layers.size(), ssmp_mamba2{}), ple_(model.spec.layers.size(), ssmp_ple{}) {
  bool any_mamba2 = false;
  for (size_t l = 0; l < model.spec.layers.size(); ++l) {
    const LayerSpec& s = model.spec.layers[l];
    const LayerWeights& w = model.weights[l];
    if (s.ple.hosted())
      ple_[l] = {s.ple.channels, s.ple.ngram_size, s.ple.k_size, s.ple.dilation, s.ple.eos_id, w.ple_w.data()};
    ssmp_layer L{SSMP_LAYER_GDN,
                 s.nk,
                 s.nv,
                 s.kd,
                 s.vd,
                 s.d_conv,
                 s.output_gate == OutputGate::sigmoid ? 1 : 0,
                 s.eps,
                 w.conv_w.data(),
                 w.conv_bias.empty() ? nullptr : w.conv_bias.data(),
                 w.A_log.data(),
                 w.dt_bias.data(),
                 w.norm_w.data()};
    if (s.kind == LayerKind::mamba2) {  // GDN's shape fields are 0; the shape travels in ssmp_config.mamba2
      L.kind = SSMP_LAYER_MAMBA2;
      L.nk = L.nv = L.kd = L.vd = L.sigmoid_gate = 0;
      mamba2_[l] = {s.nh, s.hp, s.ns, s.ng, s.norm_before_gate ? 1 : 0, s.dt_min, s.dt_max, w.D.data()};
      any_mamba2 = true;
    }
    layers_.push_back(L);
  }
  for (int s = 0; s < pool.max_slots; ++s) h_capacity_.push_back(pool.capacity(s));
  config_.struct_size = sizeof config_;
  config_.model_name = model.spec.name.c_str();
  config_.n_layers = int(layers_.size());
  config_.layers = layers_.data();
  config_.h_mode = h_mode_of(pool.h_mode);
  config_.max_slots = pool.max_slots;
  config_.h_capacity = h_capacity_.data();
  config_.conv_capacity = pool.conv_capacity;
  config_.snapshot_slots = pool.snapshot_slots;
  config_.mamba2 = any_mamba2 ? mamba2_.data() : nullptr;
  config_.ple = model.spec.hosts_ple() ? ple_.data() : nullptr;
  descs_ = std::make_unique<LayerDescs>(model.spec.layers, [&](size_t l, const WeightField& f) {
    const std::vector<float>& v = model.weights[l].*f.member;
    return v.empty() ? nullptr : v.data();
  });
  config_.layer_descs = descs_->get();
}

void add_io(const ModelSpec& spec, const StepInputs& in, int rows, StepOutputs& out, std::vector<ssmp_layer_io>& io,
            std::vector<ssmp_ple_io>& ple) {
  auto p = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  out.rows = rows;
  const bool with_ple = spec.hosts_ple();  // out.ple has an entry per layer, or none
  for (size_t l = 0; l < in.layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    const LayerRows& r = in.layers[l];
    out.layers.emplace_back(size_t(rows) * size_t(s.out_dim()), 0.0f);
    if (with_ple) out.ple.emplace_back(size_t(rows) * size_t(s.ple.channels), 0.0f);
    io.push_back({p(r.conv_in), p(r.dt_in), p(r.beta_in), p(r.gate_in), out.layers.back().data()});
    ple.push_back(s.ple.hosted() ? ssmp_ple_io{r.ple_tokens.data(), r.ple_x.data(), out.ple.back().data()}
                                 : ssmp_ple_io{nullptr, nullptr, nullptr});
  }
}

ExportRoom::ExportRoom(const ModelSpec& spec, const PoolConfig& pool, ExportConventions conventions)
    : spec_(spec), conventions_(conventions), layers_(spec.layers.size()) {
  const int h_room = pool.max_capacity(), conv_room = pool.conv_capacity;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    Layer& r = layers_[l];
    r.h.resize(size_t(s.h_elems()));
    r.h_checkpoint.resize(size_t(s.h_elems()));
    r.conv.resize(size_t(s.conv_elems()));
    r.conv_checkpoint.resize(size_t(s.conv_elems()));
    r.h_inter.assign(size_t(h_room), std::vector<float>(size_t(s.h_elems())));
    r.conv_inter.assign(size_t(conv_room), std::vector<float>(size_t(s.conv_elems())));
    for (auto& v : r.h_inter) r.h_inter_ptrs.push_back(v.data());
    for (auto& v : r.conv_inter) r.conv_inter_ptrs.push_back(v.data());
    if (s.ple.hosted()) {  // live, checkpoint, then one per row a verify may keep (K <= capacity + 1)
      const size_t hist = size_t(s.ple.history_len()), conv = size_t(s.ple.conv_rows()) * size_t(s.ple.channels);
      r.ple.assign(size_t(2 + h_room + 1), std::vector<float>(hist + conv));
      for (size_t t = 2; t < r.ple.size(); ++t) r.ple_snapshots.push_back({r.ple[t].data(), r.ple[t].data() + hist});
    }
  }
  stage_.assign(pool.h_mode == HMode::f16_pool ? size_t(stage_elems(spec)) : 0, 0.0f);
}

ssmp_state* ExportRoom::prepare() {
  states_.assign(layers_.size(), ssmp_layer_state{});
  for (size_t l = 0; l < states_.size(); ++l) {
    Layer& r = layers_[l];
    ssmp_layer_state& s = states_[l];
    s.h = r.h.data();
    s.conv = r.conv.data();
    s.h_checkpoint = r.h_checkpoint.data();
    s.conv_checkpoint = r.conv_checkpoint.data();
    s.h_intermediates = r.h_inter_ptrs.data();
    s.conv_intermediates = r.conv_inter_ptrs.data();
    s.h_intermediate_room = int(r.h_inter.size());
    s.conv_intermediate_room = int(r.conv_inter.size());
  }
  ple_states_.assign(spec_.hosts_ple() && conventions_.ple ? states_.size() : 0, ssmp_ple_state{});
  for (size_t l = 0; l < ple_states_.size(); ++l) {
    Layer& r = layers_[l];
    if (r.ple.empty()) continue;
    const size_t hist = size_t(spec_.layers[l].ple.history_len());
    ple_states_[l].live = {r.ple[0].data(), r.ple[0].data() + hist};
    ple_states_[l].checkpoint = {r.ple[1].data(), r.ple[1].data() + hist};
    ple_states_[l].snapshots = r.ple_snapshots.data();
    ple_states_[l].snapshot_room = int(r.ple_snapshots.size());
  }
  state_ = ssmp_state{};
  state_.struct_size = sizeof state_;
  state_.n_layers = int(states_.size());
  state_.layers = states_.data();
  state_.ple = ple_states_.empty() ? nullptr : ple_states_.data();
  state_.h_prefill_stage = stage_.empty() ? nullptr : stage_.data();
  state_.stage_elems = int64_t(stage_.size());
  return &state_;
}

StateLayout ExportRoom::layout() const {
  return {conventions_.short_conv_window ? ConvWindow::d_conv_minus_1 : ConvWindow::d_conv,
          conventions_.h_transposed ? HLayout::vd_kd : HLayout::kd_vd};
}

Tensor ExportRoom::read_field(const ssmp_field& f) const {
  const std::string name = f.name;
  if (name == "h_prefill_stage") return tensor(f.data, false, {int64_t(stage_.size())});
  const LayerSpec& sp = spec_.layers.at(size_t(f.layer));
  const StateLayout L = layout();
  if (name == "h" || name.rfind("h_", 0) == 0)
    return h_to_contract(tensor(f.data, f.is_f16 != 0, h_shape_in(sp, L)), sp, L);
  if (name == "conv" || name.rfind("conv_", 0) == 0)
    return conv_to_contract(tensor(f.data, false, conv_shape_in(sp, L)), sp, L);
  if (name.rfind("ple_history", 0) == 0) return tensor(f.data, false, ple_history_shape(sp));
  if (name.rfind("ple_conv", 0) == 0) return tensor(f.data, false, ple_conv_shape(sp));
  throw std::logic_error("ExportRoom::read_field: no field " + name);
}

void ExportRoom::read_field_into(const ssmp_field& f, Tensor& to) const {
  const std::string name = f.name;
  const bool h_like = name == "h" || (name.rfind("h_", 0) == 0 && name != "h_prefill_stage");
  const bool conv_like = name == "conv" || name.rfind("conv_", 0) == 0;
  const StateLayout L = layout();
  const bool as_is = (h_like && L.h_layout == HLayout::kd_vd) || (conv_like && L.conv_window == ConvWindow::d_conv) ||
                     (!h_like && !conv_like);
  const DType dtype = h_like && f.is_f16 ? DType::f16 : DType::f32;
  const std::vector<int64_t> shape(f.dims, f.dims + std::max(0, std::min(f.rank, 4)));
  if (as_is && !to.empty() && to.dtype() == dtype && to.shape() == shape) {
    std::memcpy(to.raw(), f.data, to.bytes());
    return;
  }
  to = read_field(f);
}

SequenceState ExportRoom::rest(int slot, int last_verify_k, const std::vector<bool>& h_is_f16) const {
  SequenceState out;
  out.slot = slot;
  out.prefill_stage_absent = conventions_.no_prefill_stage;
  out.last_verify_k = last_verify_k;
  for (size_t l = 0; l < states_.size(); ++l) {
    LayerState L;
    L.h_is_f16 = l < h_is_f16.size() && h_is_f16[l];
    L.conv_oldest_column_absent = conventions_.short_conv_window;
    out.layers.push_back(std::move(L));
  }
  return out;
}

SequenceState ExportRoom::read(int slot, const std::string& who) const {
  const ssmp_state& st = state_;
  auto bad = [&](const std::string& what) { throw std::runtime_error(who + " " + what); };
  if (st.last_verify_k < 0 || st.last_verify_k > kMaxIntermediates)
    bad("says last_verify_k = " + std::to_string(st.last_verify_k));
  if (st.has_prefill_stage && stage_.empty()) bad("wrote a prefill stage outside f16-pool mode");
  if (st.has_prefill_stage && conventions_.no_prefill_stage)
    bad("wrote a prefill stage but declares SSMP_NO_PREFILL_STAGE");
  SequenceState out;
  out.slot = slot;
  out.prefill_stage_absent = conventions_.no_prefill_stage;
  out.last_verify_k = st.last_verify_k;
  // the plug-in's conventions (docs/plugins.md, "Convention profiles") to the contract's layouts
  const StateLayout layout{conventions_.short_conv_window ? ConvWindow::d_conv_minus_1 : ConvWindow::d_conv,
                           conventions_.h_transposed ? HLayout::vd_kd : HLayout::kd_vd};
  const bool short_window = layout.conv_window == ConvWindow::d_conv_minus_1;
  auto h_field = [&](const void* p, bool f16, const LayerSpec& sp) {  // core/conventions.h: the conversions
    return h_to_contract(tensor(p, f16, h_shape_in(sp, layout)), sp, layout);
  };
  auto conv_field = [&](const float* p, const LayerSpec& sp) {  // column 0 of a short window: zero, not compared
    return conv_to_contract(tensor(p, false, conv_shape_in(sp, layout)), sp, layout);
  };
  for (size_t l = 0; l < states_.size(); ++l) {
    const ssmp_layer_state& s = states_[l];
    const LayerSpec& sp = spec_.layers[l];
    if (s.n_h_intermediates < 0 || s.n_h_intermediates > s.h_intermediate_room || s.n_conv_intermediates < 0 ||
        s.n_conv_intermediates > s.conv_intermediate_room)
      bad("layer " + std::to_string(l) + " says it wrote " + std::to_string(s.n_h_intermediates) + " h and " +
          std::to_string(s.n_conv_intermediates) + " conv intermediates; room: " +
          std::to_string(s.h_intermediate_room) + " and " + std::to_string(s.conv_intermediate_room));
    LayerState L;
    L.h_is_f16 = s.h_is_f16 != 0;
    L.conv_oldest_column_absent = short_window;
    L.h = h_field(s.h, L.h_is_f16, sp);
    L.conv = conv_field(s.conv, sp);
    if (s.has_h_checkpoint) L.h_checkpoint = h_field(s.h_checkpoint, s.h_checkpoint_is_f16 != 0, sp);
    if (s.has_conv_checkpoint) L.conv_checkpoint = conv_field(s.conv_checkpoint, sp);
    for (int t = 0; t < s.n_h_intermediates; ++t)
      L.h_intermediates.push_back(h_field(s.h_intermediates[t], s.h_intermediates_are_f16 != 0, sp));
    for (int t = 0; t < s.n_conv_intermediates; ++t)
      L.conv_intermediates.push_back(conv_field(s.conv_intermediates[t], sp));
    if (!ple_states_.empty() && sp.ple.hosted()) {
      const ssmp_ple_state& P = ple_states_[l];
      if (P.n_snapshots < 0 || P.n_snapshots > P.snapshot_room)
        bad("layer " + std::to_string(l) + " says it kept " + std::to_string(P.n_snapshots) +
            " PLE snapshots; room: " + std::to_string(P.snapshot_room));
      auto carry = [&](const ssmp_ple_carry& c) {
        return PleCarry{tensor(c.history, false, ple_history_shape(sp)), tensor(c.conv, false, ple_conv_shape(sp))};
      };
      if (P.has_live) L.ple = carry(P.live);
      if (P.has_checkpoint) L.ple_checkpoint = carry(P.checkpoint);
      for (int t = 0; t < P.n_snapshots; ++t) L.ple_snapshots.push_back(carry(layers_[l].ple_snapshots[size_t(t)]));
    }
    out.layers.push_back(std::move(L));
  }
  if (st.has_prefill_stage) out.h_prefill_stage = tensor(stage_.data(), false, {int64_t(stage_.size())});
  return out;
}

}  // namespace ssm::plugin
