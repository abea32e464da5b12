// A Backend exposed through the plug-in C ABI (see backend_plugin.h).
#include "plugin/backend_plugin.h"

#include <cstddef>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <stdexcept>

#include "core/errors.h"
#include "core/state.h"
#include "core/state_fields.h"
#include "plugin/config_model.h"
#include "plugin/field_keys.h"
#include "plugin/ssmp_error_text.h"

namespace ssm::plugin {

namespace {

ExposedBackend g_exposed;  // one per plug-in library (this file is linked into each)
ssmp_plugin g_table;

struct Instance {
  std::unique_ptr<Backend> backend;
  ModelSpec spec;
};
Instance& self(void* p) { return *static_cast<Instance*>(p); }

// Inputs of one entry, copied from the C layout (ple: NULL for a model hosting no PLE carry).
StepInputs inputs_of(const ModelSpec& spec, const ssmp_layer_io* io, const ssmp_ple_io* ple, int rows) {
  StepInputs in;
  in.rows = rows;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    // where the ABI carries each input; the kind's inputs() say which it has and their widths
    const std::pair<std::vector<float> LayerRows::*, const float*> given[] = {
        {&LayerRows::conv_in, io[l].x},
        {&LayerRows::dt_in, io[l].a},
        {&LayerRows::beta_in, io[l].b},
        {&LayerRows::gate_in, io[l].z},
        {&LayerRows::ple_tokens, ple ? ple[l].tokens : nullptr},
        {&LayerRows::ple_x, ple ? ple[l].x : nullptr}};
    LayerRows lr;
    for (const InputField& f : spec.layers[l].inputs()) {
      const float* src = nullptr;
      for (const auto& [member, p] : given)
        if (member == f.member) src = p;
      if (!src) throw std::invalid_argument("layer " + std::to_string(l) + ": input " + f.name + " is NULL");
      (lr.*f.member).assign(src, src + size_t(rows) * size_t(f.width));
    }
    in.layers.push_back(std::move(lr));
  }
  return in;
}

void write_outputs(const StepOutputs& out, ssmp_layer_io* io, const ssmp_ple_io* ple) {
  for (size_t l = 0; l < out.layers.size(); ++l)
    std::memcpy(io[l].out, out.layers[l].data(), out.layers[l].size() * sizeof(float));
  for (size_t l = 0; ple && l < out.ple.size(); ++l) {
    if (out.ple[l].empty()) continue;
    if (!ple[l].out) throw std::invalid_argument("layer " + std::to_string(l) + ": ple out is NULL");
    std::memcpy(ple[l].out, out.ple[l].data(), out.ple[l].size() * sizeof(float));
  }
}

void copy_tensor(void* dst, const Tensor& t) { std::memcpy(dst, t.raw(), t.bytes()); }

void* create(const char* options, ssmp_error* err) {
  auto inst = std::make_unique<Instance>();
  const int rc = guarded(err, [&] { inst->backend = g_exposed.make(options ? options : ""); });
  return rc == SSMP_OK && inst->backend ? inst.release() : nullptr;
}

void destroy(void* p) { delete static_cast<Instance*>(p); }

int create_pool(void* p, const ssmp_config* c, ssmp_error* err) {
  return guarded(err, [&] {
    const Model m = model_of(c);
    self(p).backend->create_pool(m, pool_of(c));
    self(p).spec = m.spec;
  });
}

int alloc(void* p, int min_capacity, int* slot, ssmp_error* err) {
  return guarded(err, [&] { *slot = self(p).backend->alloc(min_capacity); });
}

int release(void* p, int slot, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->release(slot); });
}

int prefill_ple(void* p, int slot, int rows, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  return guarded(err, [&] {
    write_outputs(self(p).backend->prefill(slot, inputs_of(self(p).spec, io, ple, rows)), io, ple);
  });
}

int prefill(void* p, int slot, int rows, ssmp_layer_io* io, ssmp_error* err) {
  return prefill_ple(p, slot, rows, io, nullptr, err);
}

// decode (k == 0) or verify; ple NULL for a model hosting no PLE carry
int batch(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, const ssmp_ple_io* ple,
          ssmp_error* err) {
  return guarded(err, [&] {
    Instance& I = self(p);
    const size_t L = I.spec.layers.size();
    const int rows = k == 0 ? 1 : k;
    const std::vector<int> s(slots, slots + n);
    auto ple_of = [&](int i) { return ple ? ple + size_t(i) * L : nullptr; };
    std::vector<StepInputs> in;
    for (int i = 0; i < n; ++i) in.push_back(inputs_of(I.spec, io + size_t(i) * L, ple_of(i), rows));
    const auto out = k == 0 ? I.backend->decode(s, in)
                            : I.backend->verify(s, k, arm == SSMP_ARM_WY ? VerifyArm::wy : VerifyArm::exact, in);
    for (int i = 0; i < n; ++i) write_outputs(out[size_t(i)], io + size_t(i) * L, ple_of(i));
  });
}

int decode(void* p, int n, const int* slots, ssmp_layer_io* io, ssmp_error* err) {
  return batch(p, n, slots, 0, SSMP_ARM_EXACT, io, nullptr, err);
}

int verify(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, ssmp_error* err) {
  return batch(p, n, slots, k, arm, io, nullptr, err);
}

int decode_ple(void* p, int n, const int* slots, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  return batch(p, n, slots, 0, SSMP_ARM_EXACT, io, ple, err);
}

int verify_ple(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, const ssmp_ple_io* ple,
               ssmp_error* err) {
  return batch(p, n, slots, k, arm, io, ple, err);
}

int checkpoint(void* p, int slot, int async, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->checkpoint(slot, async != 0); });
}

int commit(void* p, int slot, int n, int k, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->commit(slot, n, k); });
}

int rollback(void* p, int slot, int n, int and_checkpoint, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->rollback(slot, n, and_checkpoint != 0); });
}

int to_f16(void* p, int slot, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->to_f16(slot); });
}

int snapshot_save(void* p, int slot, int snap, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->snapshot_save(slot, snap); });
}

int snapshot_restore(void* p, int slot, int snap, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend->snapshot_restore(slot, snap); });
}

int export_state(void* p, int slot, ssmp_state* out, ssmp_error* err) {
  return guarded(err, [&] {
    if (out->struct_size < offsetof(ssmp_state, ple)) throw std::invalid_argument("ssmp_state from an older header");
    ssmp_ple_state* ple = covers(out->struct_size, offsetof(ssmp_state, ple), sizeof out->ple) ? out->ple : nullptr;
    const SequenceState st = self(p).backend->export_state(slot);
    if (out->n_layers != int(st.layers.size())) throw std::invalid_argument("ssmp_state has the wrong layer count");
    out->last_verify_k = st.last_verify_k;
    for (size_t l = 0; l < st.layers.size(); ++l) {
      const LayerState& s = st.layers[l];
      ssmp_layer_state& o = out->layers[l];
      copy_tensor(o.h, s.h);
      o.h_is_f16 = s.h.dtype() == DType::f16;
      copy_tensor(o.conv, s.conv);
      o.has_h_checkpoint = s.h_checkpoint.has_value();
      if (s.h_checkpoint) {
        copy_tensor(o.h_checkpoint, *s.h_checkpoint);
        o.h_checkpoint_is_f16 = s.h_checkpoint->dtype() == DType::f16;
      }
      o.has_conv_checkpoint = s.conv_checkpoint.has_value();
      if (s.conv_checkpoint) copy_tensor(o.conv_checkpoint, *s.conv_checkpoint);
      if (int(s.h_intermediates.size()) > o.h_intermediate_room ||
          int(s.conv_intermediates.size()) > o.conv_intermediate_room)
        throw std::invalid_argument("more intermediates than the export has room for");
      o.n_h_intermediates = int(s.h_intermediates.size());
      o.n_conv_intermediates = int(s.conv_intermediates.size());
      for (size_t t = 0; t < s.h_intermediates.size(); ++t) {
        copy_tensor(o.h_intermediates[t], s.h_intermediates[t]);
        o.h_intermediates_are_f16 = s.h_intermediates[t].dtype() == DType::f16;
      }
      for (size_t t = 0; t < s.conv_intermediates.size(); ++t)
        copy_tensor(o.conv_intermediates[t], s.conv_intermediates[t]);
      if (!ple || !self(p).spec.layers[l].ple.hosted()) continue;
      ssmp_ple_state& P = ple[l];
      auto carry = [](const ssmp_ple_carry& dst, const PleCarry& c) {
        copy_tensor(dst.history, c.history);
        copy_tensor(dst.conv, c.conv);
      };
      P.has_live = s.ple.has_value();
      if (s.ple) carry(P.live, *s.ple);
      P.has_checkpoint = s.ple_checkpoint.has_value();
      if (s.ple_checkpoint) carry(P.checkpoint, *s.ple_checkpoint);
      if (int(s.ple_snapshots.size()) > P.snapshot_room) throw std::invalid_argument("more PLE snapshots than room");
      P.n_snapshots = int(s.ple_snapshots.size());
      for (size_t t = 0; t < s.ple_snapshots.size(); ++t) carry(P.snapshots[t], s.ple_snapshots[t]);
    }
    out->has_prefill_stage = st.h_prefill_stage.has_value();
    if (st.h_prefill_stage) {
      if (out->stage_elems != st.h_prefill_stage->size()) throw std::invalid_argument("stage of the wrong size");
      copy_tensor(out->h_prefill_stage, *st.h_prefill_stage);
    }
  });
}

int pause_async_copies(void* p, int on) { return self(p).backend->pause_async_copies(on != 0) ? 1 : 0; }
int async_pending(void* p, int slot) { return self(p).backend->async_pending(slot) ? 1 : 0; }
int perturb_schedule(void* p, uint64_t seed) { return self(p).backend->perturb_schedule(seed) ? 1 : 0; }

// The backend's own field digests (dtype, shape and bits of each; core/state_fields.h) by the
// fields' names, and its rest digest last.
int field_digests(void* p, int slot, int n_fields, ssmp_field* fields, uint64_t* digests, ssmp_error* err) {
  return guarded(err, [&] {
    const std::optional<FieldDigests> d = self(p).backend->field_digests(slot);
    if (!d) throw std::runtime_error("field_digests: this backend has none");
    std::map<FieldKey, uint64_t> by_key;
    uint64_t rest = 0;
    for (const FieldDigest& f : *d) (f.key.kind == FieldKind::rest ? rest : by_key[f.key]) = f.digest;
    for (int i = 0; i < n_fields; ++i) {
      ssmp_field& f = fields[i];
      const std::optional<FieldKey> key = field_key_of(f.name, f.layer, f.index);
      const auto it = key ? by_key.find(*key) : by_key.end();
      f.present = it != by_key.end() ? 1 : 0;
      if (f.present) digests[i] = it->second;
    }
    digests[n_fields] = rest;
  });
}

}  // namespace

const ssmp_plugin* expose(const ExposedBackend& what) {
  g_exposed = what;
  g_table = ssmp_plugin{SSMP_ABI_VERSION,
                        sizeof(ssmp_plugin),
                        g_exposed.name.c_str(),
                        g_exposed.flags,
                        create,
                        destroy,
                        create_pool,
                        alloc,
                        release,
                        prefill,
                        decode,
                        verify,
                        checkpoint,
                        commit,
                        rollback,
                        to_f16,
                        snapshot_save,
                        snapshot_restore,
                        export_state,
                        what.async_copies ? pause_async_copies : nullptr,
                        what.async_copies ? async_pending : nullptr,
                        prefill_ple,
                        decode_ple,
                        verify_ple,
                        what.capabilities,
                        what.perturbable ? perturb_schedule : nullptr,
                        nullptr,
                        nullptr,
                        what.field_digests ? field_digests : nullptr};
  return &g_table;
}

}  // namespace ssm::plugin
