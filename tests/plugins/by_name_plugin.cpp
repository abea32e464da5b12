// A plug-in written only by name (SSMP_BY_NAME, plugin/ssmcheck_plugin.h): ssmcheck's reference
// underneath, its model built from ssmp_config.layer_descs through core's layer_from_attrs, an op's
// inputs and outputs and the state's fields looked up by their names; nothing in it names a layer
// kind, so a kind core adds runs here unchanged. The old-ABI counterpart is
// plugin/reference_plugin.cpp (through plugin/backend_plugin.cpp); tests/plugin_by_name_test.cpp
// holds the two to the same verdicts. It has field digests (ssmp_plugin.field_digests), so ssmcheck
// reads back only the fields that changed. Options (a planted wrong answer, for the tests): fault=
// absent_conv (conv never present), f16_conv (conv said FP16), unknown_output (it knows no "out"),
// hidden_drift (each decode moves h[0] of layer 0 of every other live sequence by +1 in what
// export_fields copies, while its digests stay those of the true state: digests that lie);
// log=PATH (a line per export_fields and field_digests).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/model.h"
#include "core/state.h"
#include "core/state_digest.h"
#include "plugin/config_model.h"
#include "plugin/ssmcheck_plugin.h"
#include "plugin/ssmp_error_text.h"
#include "reference/reference_backend.h"

namespace {

using namespace ssm;
using ssm::plugin::guarded;
using ssm::plugin::pool_of;
using ssm::plugin::set_text;

struct Instance {
  ref::ReferenceBackend backend;
  ModelSpec spec;
  std::string fault;
  std::string log;             // option log=PATH: a line per export_fields ("export_fields N") and field_digests call
  std::map<int, float> drift;  // fault=hidden_drift: per claimed slot, what export_fields adds to h[0]
  void note(const std::string& line) const {
    if (log.empty()) return;
    std::ofstream(log, std::ios::app) << line << "\n";
  }
};
Instance& self(void* p) { return *static_cast<Instance*>(p); }

// The entry of `items` named `name`, or nullptr.
template <class T>
const T* named(const T* items, int n, const char* name) {
  for (int i = 0; i < n; ++i)
    if (std::strcmp(items[i].name, name) == 0) return &items[i];
  return nullptr;
}

int64_t elems(int rank, const int64_t* dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

void* create(const char* options, ssmp_error* err) {
  auto inst = std::make_unique<Instance>();
  const std::string text = options ? options : "";
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string o = text.substr(start, end - start);
    start = end + 1;
    if (o.rfind("log=", 0) == 0) {
      inst->log = o.substr(4);
      continue;
    }
    const std::string f = o.rfind("fault=", 0) == 0 ? o.substr(6) : "";
    if (f != "absent_conv" && f != "f16_conv" && f != "unknown_output" && f != "hidden_drift") {
      set_text(err->message, sizeof err->message,
               "unknown option '" + o +
                   "' (known: fault=absent_conv, fault=f16_conv, fault=unknown_output, fault=hidden_drift, log=PATH)");
      return nullptr;
    }
    inst->fault = f;
  }
  return inst.release();
}

void destroy(void* p) { delete static_cast<Instance*>(p); }

int create_pool(void* p, const ssmp_config* c, ssmp_error* err) {
  return guarded(err, [&] {
    const Model m = plugin::model_of_descs(c);  // through core's layer_from_attrs, weights by name
    self(p).backend.create_pool(m, pool_of(c));
    self(p).spec = m.spec;
  });
}

// One entry's inputs at every layer, by the names its layers' kinds take (LayerSpec::inputs).
StepInputs inputs_of(const ModelSpec& spec, const ssmp_rows_io* io, int rows) {
  StepInputs in;
  in.rows = rows;
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const std::string at = "layer " + std::to_string(l);
    const std::vector<InputField> fields = spec.layers[l].inputs();
    LayerRows lr;
    for (const InputField& f : fields) {
      const ssmp_input* g = named(io[l].inputs, io[l].n_inputs, f.name);
      if (!g || !g->data) throw std::invalid_argument(at + ": input " + f.name + " not given");
      if (g->width != f.width)
        throw std::invalid_argument(at + ": input " + f.name + " of width " + std::to_string(g->width) + ", expected " +
                                    std::to_string(f.width));
      (lr.*f.member).assign(g->data, g->data + size_t(rows) * size_t(f.width));
    }
    if (int(fields.size()) != io[l].n_inputs) throw std::invalid_argument(at + ": inputs it does not know");
    in.layers.push_back(std::move(lr));
  }
  return in;
}

// One entry's outputs by name (LayerSpec::outputs: "out", and "ple_out" on a layer hosting a carry).
void write_outputs(const ModelSpec& spec, const StepOutputs& out, const ssmp_rows_io* io, int rows,
                   const std::string& fault) {
  for (size_t l = 0; l < out.layers.size(); ++l)
    for (int i = 0; i < io[l].n_outputs; ++i) {
      const ssmp_output& o = io[l].outputs[i];
      const std::string name = o.name;
      const std::vector<float>* src = nullptr;
      for (const OutputField& f : spec.layers[l].outputs())
        if (name == f.name && l < (out.*f.member).size() && !(fault == "unknown_output" && name == "out"))
          src = &(out.*f.member)[l];
      if (!src) throw std::invalid_argument("layer " + std::to_string(l) + ": unknown output '" + name + "'");
      if (src->size() != size_t(rows) * size_t(o.width))
        throw std::invalid_argument("layer " + std::to_string(l) + ": output " + name + " of another width");
      std::memcpy(o.data, src->data(), src->size() * sizeof(float));
    }
}

int rows(void* p, int op, int n, const int* slots, int k, int arm, ssmp_rows_io* io, ssmp_error* err) {
  return guarded(err, [&] {
    Instance& I = self(p);
    const size_t L = I.spec.layers.size();
    std::vector<StepInputs> in;
    for (int i = 0; i < n; ++i) in.push_back(inputs_of(I.spec, io + size_t(i) * L, k));
    const std::vector<int> s(slots, slots + n);
    std::vector<StepOutputs> out;
    if (op == SSMP_OP_PREFILL && n == 1) out.push_back(I.backend.prefill(s[0], in[0]));
    else if (op == SSMP_OP_DECODE) out = I.backend.decode(s, in);
    else if (op == SSMP_OP_VERIFY)
      out = I.backend.verify(s, k, arm == SSMP_ARM_WY ? VerifyArm::wy : VerifyArm::exact, in);
    else throw std::invalid_argument("rows: op " + std::to_string(op) + " of " + std::to_string(n) + " entries");
    for (int i = 0; i < n; ++i) write_outputs(I.spec, out[size_t(i)], io + size_t(i) * L, k, I.fault);
    if (op == SSMP_OP_DECODE && I.fault == "hidden_drift")
      for (auto& [slot, d] : I.drift)
        if (std::find(s.begin(), s.end(), slot) == s.end()) d += 1.0f;
  });
}

// The tensor of field f in an export (core/state.h's state_field), or nullptr when the slot has none.
const Tensor* field_of(const SequenceState& st, const ssmp_field& f) {
  const std::string name = f.name;
  return f.layer < 0 ? (name == "h_prefill_stage" && st.h_prefill_stage ? &*st.h_prefill_stage : nullptr)
                     : state_field(st.layers.at(size_t(f.layer)), name, f.index);
}

// Each field's digest by name: core's tensor_digest (dtype, shape and bits) of what export_fields
// would copy; the rest: last_verify_k (the digests cover the dtypes). With fault=hidden_drift they
// are the true state's, not what export_fields copies: digests that lie.
int field_digests(void* p, int slot, int n_fields, ssmp_field* fields, uint64_t* digests, ssmp_error* err) {
  return guarded(err, [&] {
    Instance& I = self(p);
    const SequenceState st = I.backend.export_state(slot);
    for (int i = 0; i < n_fields; ++i) {
      ssmp_field& f = fields[i];
      const Tensor* t = field_of(st, f);
      f.present = t != nullptr;
      f.is_f16 = t && t->dtype() == DType::f16;
      digests[i] = t ? tensor_digest(*t) : 0;
    }
    digests[n_fields] = uint64_t(st.last_verify_k);
    I.note("field_digests");
  });
}

// Every field asked for that the slot holds (core/state.h's state_field), copied and marked present.
int export_fields(void* p, int slot, int n_fields, ssmp_field* fields, int* last_verify_k, ssmp_error* err) {
  return guarded(err, [&] {
    Instance& I = self(p);
    I.note("export_fields " + std::to_string(n_fields));
    const SequenceState st = I.backend.export_state(slot);
    *last_verify_k = st.last_verify_k;
    for (int i = 0; i < n_fields; ++i) {
      ssmp_field& f = fields[i];
      const std::string name = f.name;
      const Tensor* t = field_of(st, f);
      f.present = f.is_f16 = 0;
      if (!t) continue;
      if (t->size() != elems(f.rank, f.dims))
        throw std::invalid_argument("layer " + std::to_string(f.layer) + " field " + name + ": " +
                                    std::to_string(t->size()) + " values, the buffer is of another shape");
      std::memcpy(f.data, t->raw(), t->bytes());
      if (name == "h" && f.layer == 0 && t->dtype() == DType::f32 && I.drift.count(slot))
        static_cast<float*>(f.data)[0] += I.drift.at(slot);
      f.present = !(I.fault == "absent_conv" && name == "conv");
      f.is_f16 = t->dtype() == DType::f16 || (I.fault == "f16_conv" && name == "conv");
    }
  });
}

int alloc(void* p, int min_capacity, int* slot, ssmp_error* err) {
  return guarded(err, [&] {
    *slot = self(p).backend.alloc(min_capacity);
    if (self(p).fault == "hidden_drift") self(p).drift[*slot] = 0.0f;
  });
}
int release(void* p, int slot, ssmp_error* err) {
  return guarded(err, [&] {
    self(p).backend.release(slot);
    self(p).drift.erase(slot);
  });
}
int checkpoint(void* p, int slot, int async, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend.checkpoint(slot, async != 0); });
}
int commit(void* p, int slot, int n, int k, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend.commit(slot, n, k); });
}
int rollback(void* p, int slot, int n, int and_checkpoint, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend.rollback(slot, n, and_checkpoint != 0); });
}
int to_f16(void* p, int slot, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend.to_f16(slot); });
}
int snapshot_save(void* p, int slot, int snap, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend.snapshot_save(slot, snap); });
}
int snapshot_restore(void* p, int slot, int snap, ssmp_error* err) {
  return guarded(err, [&] { self(p).backend.snapshot_restore(slot, snap); });
}

}  // namespace

extern "C" SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  static const ssmp_plugin table = [] {
    ssmp_plugin t{};  // prefill, decode, verify, export_state and the *_ple members stay NULL
    t.abi_version = SSMP_ABI_VERSION;
    t.struct_size = sizeof t;
    t.name = "ssmcheck reference, by name (tests)";
    t.flags = SSMP_OWN_LEGALITY | SSMP_BITWISE | SSMP_MAMBA2 | SSMP_PLE | SSMP_BY_NAME;
    t.create = create;
    t.destroy = destroy;
    t.create_pool = create_pool;
    t.alloc = alloc;
    t.release = release;
    t.checkpoint = checkpoint;
    t.commit = commit;
    t.rollback = rollback;
    t.to_f16 = to_f16;
    t.snapshot_save = snapshot_save;
    t.snapshot_restore = snapshot_restore;
    t.rows = rows;
    t.export_fields = export_fields;
    t.field_digests = field_digests;
    return t;
  }();
  return &table;
}
