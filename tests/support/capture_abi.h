// Writing a recorded trace through the capture C ABI (capture/ssmcheck_capture.h), as an engine
// would: open_for declares its model and pool, capture_op gives one op's inputs, outputs, refusal
// and states. GDN models without PLE carries (the presets the async tests use). by_name: layers,
// weights, inputs and outputs by name (ABI minor 6: ssmc_add_layer_by_name, ssmc_set_layer_weight,
// ssmc_op_input, ssmc_op_output), else through the per-kind calls.
#pragma once
#include <functional>
#include <string>

#include "capture/ssmcheck_capture.h"
#include "core/layer_attrs.h"
#include "formats/trace.h"

namespace ssm::test {

// A capture of `path` with r's model (every layer's own weights) and pool; null on failure.
inline ssmc_trace* open_for(const formats::TraceHeader& h, const std::string& path, bool by_name = false) {
  ssmc_trace* t = nullptr;
  if (ssmc_open(path.c_str(), "capture test", h.backend.c_str(), h.model.spec.name.c_str(), to_string(h.pool.h_mode),
                &t) != SSMC_OK)
    return nullptr;
  const PoolConfig& p = h.pool;
  if (ssmc_set_pool(t, p.max_slots, p.h_capacity.empty() ? nullptr : p.h_capacity.data(), p.conv_capacity,
                    p.snapshot_slots) != SSMC_OK) {
    ssmc_abandon(t);
    return nullptr;
  }
  for (size_t l = 0; l < h.model.spec.layers.size(); ++l) {
    const LayerSpec& s = h.model.spec.layers[l];
    const LayerWeights& w = h.model.weights[l];
    if (by_name) {
      std::vector<LayerAttr> attrs = layer_attrs(s);
      std::vector<const char*> names, values;
      for (const LayerAttr& a : attrs)
        if (a.name != "kind") names.push_back(a.name.c_str()), values.push_back(a.value.c_str());
      bool ok = ssmc_add_layer_by_name(t, to_string(s.kind), int(names.size()), names.data(), values.data(), nullptr) ==
                SSMC_OK;
      for (const WeightField& f : s.weights())
        ok = ok &&
             ssmc_set_layer_weight(t, int(l), f.name, (w.*f.member).data(), int64_t((w.*f.member).size())) == SSMC_OK;
      if (!ok) {
        ssmc_abandon(t);
        return nullptr;
      }
      continue;
    }
    const ssmc_layer_desc desc = {
        s.nk, s.nv, s.kd, s.vd, s.d_conv, s.conv_bias ? 1 : 0, s.output_gate == OutputGate::sigmoid ? 1 : 0, s.eps};
    if (ssmc_add_layer(t, &desc, w.conv_w.data(), s.conv_bias ? w.conv_bias.data() : nullptr, w.A_log.data(),
                       w.dt_bias.data(), w.norm_w.data()) != SSMC_OK) {
      ssmc_abandon(t);
      return nullptr;
    }
  }
  return t;
}
template <class R>
ssmc_trace* open_for(const R& r, const std::string& path, bool by_name = false) {
  return open_for(r.header, path, by_name);
}

// Where the capture reads an array from: the host array itself, or a device copy (the GPU test).
using ToMemory = std::function<const void*(const void* host, size_t bytes)>;

// One op through the C ABI, ended with ssmc_end_op; the first failing call's status.
inline ssmc_status capture_op(ssmc_trace* t, const ModelSpec& spec, const formats::TraceOp& op, ssmc_memory mem,
                              const ToMemory& to = nullptr, void* stream = nullptr, bool by_name = false) {
  auto at = [&](const void* p, size_t bytes) -> const void* { return to && p && bytes ? to(p, bytes) : p; };
  auto fl = [&](const std::vector<float>& v) {
    return static_cast<const float*>(v.empty() ? nullptr : at(v.data(), v.size() * 4));
  };
  auto tensor = [&](const Tensor& x) { return at(x.raw(), x.bytes()); };
#define SSMC_TRY(call)              \
  do {                              \
    const ssmc_status st_ = (call); \
    if (st_ != SSMC_OK) return st_; \
  } while (0)
  SSMC_TRY(ssmc_begin_op(t, to_string(op.op).c_str()));
  if (stream) SSMC_TRY(ssmc_op_stream(t, stream));
  if (op.refused) SSMC_TRY(ssmc_op_refused(t, to_string(*op.refused)));
  for (size_t e = 0; e < op.inputs.size(); ++e)
    for (size_t l = 0; l < op.inputs[e].layers.size(); ++l) {
      const LayerRows& r = op.inputs[e].layers[l];
      if (by_name) {
        for (const InputField& f : spec.layers[l].inputs())
          SSMC_TRY(ssmc_op_input(t, int(e), int(l), f.name, SSMC_F32, fl(r.*f.member), mem));
        continue;
      }
      SSMC_TRY(ssmc_op_inputs(t, int(e), int(l), fl(r.conv_in), fl(r.dt_in), fl(r.beta_in), fl(r.gate_in), mem));
    }
  for (size_t e = 0; e < op.outputs.size(); ++e)
    if (op.outputs[e])
      for (size_t l = 0; l < spec.layers.size(); ++l)
        SSMC_TRY(by_name ? ssmc_op_output(t, int(e), int(l), "out", fl(op.outputs[e]->layers[l]), mem)
                         : ssmc_op_outputs(t, int(e), int(l), fl(op.outputs[e]->layers[l]), mem));
  for (const formats::TraceState& ts : op.states) {
    const SequenceState& s = ts.state;
    SSMC_TRY(ssmc_state_begin(t, ts.seq, s.slot, s.last_verify_k));
    if (s.h_prefill_stage)
      SSMC_TRY(ssmc_state_tensor(t, ts.seq, 0, "h_prefill_stage", 0, SSMC_F32, tensor(*s.h_prefill_stage), mem));
    for (size_t i = 0; i < ts.layers.size(); ++i) {
      const LayerState& ls = s.layers[i];
      const int l = ts.layers[i];
      const ssmc_dtype hd = ls.h_is_f16 ? SSMC_F16 : SSMC_F32;
      SSMC_TRY(ssmc_state_tensor(t, ts.seq, l, "h", 0, hd, tensor(ls.h), mem));
      SSMC_TRY(ssmc_state_tensor(t, ts.seq, l, "conv", 0, SSMC_F32, tensor(ls.conv), mem));
      if (ls.h_checkpoint)
        SSMC_TRY(ssmc_state_tensor(t, ts.seq, l, "h_checkpoint", 0,
                                   ls.h_checkpoint->dtype() == DType::f16 ? SSMC_F16 : SSMC_F32,
                                   tensor(*ls.h_checkpoint), mem));
      if (ls.conv_checkpoint)
        SSMC_TRY(ssmc_state_tensor(t, ts.seq, l, "conv_checkpoint", 0, SSMC_F32, tensor(*ls.conv_checkpoint), mem));
      for (size_t k = 0; k < ls.h_intermediates.size(); ++k)
        SSMC_TRY(ssmc_state_tensor(t, ts.seq, l, "h_intermediate", int(k),
                                   ls.h_intermediates[k].dtype() == DType::f16 ? SSMC_F16 : SSMC_F32,
                                   tensor(ls.h_intermediates[k]), mem));
      for (size_t k = 0; k < ls.conv_intermediates.size(); ++k)
        SSMC_TRY(ssmc_state_tensor(t, ts.seq, l, "conv_intermediate", int(k), SSMC_F32,
                                   tensor(ls.conv_intermediates[k]), mem));
    }
  }
#undef SSMC_TRY
  return ssmc_end_op(t);
}

}  // namespace ssm::test
