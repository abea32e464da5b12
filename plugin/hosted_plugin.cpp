// A system under test served by a host process (see hosted_plugin.h).
#include "plugin/hosted_plugin.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/child_process.h"
#include "core/conventions.h"
#include "core/layer_attrs.h"
#include "core/state.h"
#include "plugin/capabilities_wire.h"
#include "plugin/config_model.h"
#include "plugin/plugin_backend.h"
#include "plugin/ssmp_error_text.h"

#ifndef SSMCHECK_BUILD_PLUGIN_HOST
#define SSMCHECK_BUILD_PLUGIN_HOST ""
#endif

namespace ssm::plugin {

namespace {

using nlohmann::json;
using Piece = wire::Arena::Piece;

// The exports a host sent with an op's reply (wire::kExportAfter): valid until the next call to
// that host, whose arena holds their arrays until then.
struct SentExports {
  bool valid = false;
  int64_t instance = 0;
  int generation = 0;
  size_t op_arrays = 0;  // the reply's arrays before the exports': the op's outputs
  std::vector<wire::ExportHead> heads;
  std::vector<std::pair<size_t, size_t>> spans;  // where each head's arrays start and end in `arrays`
  std::vector<std::pair<const char*, uint64_t>> arrays;
};

// The field digests a host sent with an op's reply ("digests_after": a host of JSON calls, the
// Python host): each claimed slot's, as field_digests answers them. Valid until the next call that
// may change a slot; the calls that read state (export_state, export_fields, field_digests) keep them.
struct SentDigests {
  bool valid = false;
  int64_t instance = 0;
  int generation = 0;
  std::map<int, json> by_slot;  // slot -> {"fields": [...], "rest": digest}
};

// One host and the table that forwards to it.
struct Host {
  explicit Host(HostLaunch l) : proc(std::move(l)) {}
  HostProcess proc;
  std::string name;
  json declaration;  // the first hello, which every restart must repeat
  ssmp_plugin table{};
  ssmp_capabilities capabilities{};  // the hello's "capabilities" (table.capabilities points here)
  SentExports sent;
  SentDigests digests;
  bool with_ops = true;  // SSMCHECK_EXPORTS_WITH_OPS (exports_with_ops_setting), read when the host starts
};
std::vector<std::unique_ptr<Host>>& hosts() {
  static std::vector<std::unique_ptr<Host>> v;
  return v;
}

// The width of a per-token input of layer s, 0 when its kind has none (core/layer_geometry.cpp).
size_t input_width(const LayerSpec& s, std::vector<float> LayerRows::*member) {
  for (const InputField& f : s.inputs())
    if (f.member == member) return size_t(f.width);
  return 0;
}

struct Instance {
  Host* host = nullptr;
  int generation = 0;  // the host's start it was created on
  int64_t id = 0;
  std::vector<LayerSpec> layers;  // the pool's model (create_pool), whose geometry sizes every array
  std::vector<Piece> inputs;      // the last call's input arrays (reused)
  bool export_after = false;      // op calls carry wire::kExportAfter (create_pool decides) ...
  bool digests_after = false;     // ... or "digests_after" (sent_with_ops) ...
  bool read_after_op = false;     // ... when the caller read a state after the last op ...
  bool async_paused = false;      // ... and its async copies are not paused (pause_async_copies)
};
Instance& self(void* p) { return *static_cast<Instance*>(p); }

Piece floats(const float* p, size_t n) { return {p, n * sizeof(float)}; }

std::string slots_text(const json& req) {
  std::string s;
  for (const json& v : req.at("slots")) s += (s.empty() ? "" : ", ") + (v.get<int>() < 0 ? std::string("pad") : v.dump());
  return s;
}

// What a request is, for messages: "decode(slots 0, pad)".
std::string what_of(const json& req) {
  const std::string call = req.value("call", std::string("?"));
  std::string args;
  if (req.contains("slots")) args = "slots " + slots_text(req);
  else if (req.contains("slot")) args = "slot " + req.at("slot").dump();
  if (req.contains("rows")) args += ", " + req.at("rows").dump() + " rows";
  if (req.contains("n")) args += ", n " + req.at("n").dump();
  if (req.contains("k")) args += ", k " + req.at("k").dump();
  return call + "(" + args + ")";
}

// Whether a call may change a slot's state: the digests sent with an op's reply outlive only the
// calls that read it.
enum class Reads { state_only, any };

// One call of an instance: sends it with `send` (which returns the reply), maps the reply's
// status; the reply in *reply (valid until the next call). A host that died now or earlier is an
// error of the call, named by `what`.
template <class Send, class What>
int exchange_with(Instance& I, const Send& send, const What& what, ssmp_error* err, const HostProcess::Reply** reply,
                  Reads reads = Reads::any) {
  HostProcess& proc = I.host->proc;
  I.host->sent.valid = false;  // the call overwrites the arena, and may change any slot
  if (reads == Reads::any) I.host->digests.valid = false;
  try {
    if (!proc.running() || proc.generation() != I.generation)
      throw HostDied(what() + ": the host process of this instance is gone (" + proc.last_death() + ")");
    const HostProcess::Reply& r = send(proc);
    *reply = &r;
    const int status = r.status();
    if (status == SSMP_OK) return SSMP_OK;
    if (r.compact) {  // a host answers a refusal or error with its message, in JSON
      set_text(err->kind, sizeof err->kind, "");
      set_text(err->message, sizeof err->message, what() + ": status " + std::to_string(status) + " without a message");
      return SSMP_ERROR;
    }
    set_text(err->kind, sizeof err->kind, r.msg.value("kind", ""));
    set_text(err->message, sizeof err->message, r.msg.value("message", ""));
    return status == SSMP_REFUSED ? SSMP_REFUSED : SSMP_ERROR;
  } catch (const std::exception& e) {
    set_text(err->kind, sizeof err->kind, "");
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
}

// A call in JSON (create, create_pool, export_state, the rare ones).
int exchange(Instance& I, json req, const std::vector<Piece>& arrays, ssmp_error* err, const HostProcess::Reply** reply,
             Reads reads = Reads::any) {
  req["instance"] = I.id;
  auto what = [&] { return what_of(req); };
  return exchange_with(
      I, [&](HostProcess& proc) -> const HostProcess::Reply& { return proc.call(req, arrays, what); }, what, err, reply,
      reads);
}

// The arrays of an export with this head, in export_state's reply (wire::ExportHead).
size_t export_arrays(const wire::ExportHead& h) {
  size_t n = h.has_prefill_stage ? 1 : 0;
  for (const wire::ExportedLayer& o : h.layers) {
    n += 2 + (o.has_h_checkpoint ? 1 : 0) + (o.has_conv_checkpoint ? 1 : 0) + size_t(std::max(0, o.n_h_intermediates)) +
         size_t(std::max(0, o.n_conv_intermediates));
    if (o.has_ple)
      n += 2 * ((o.ple_has_live ? 1 : 0) + (o.ple_has_checkpoint ? 1 : 0) + size_t(std::max(0, o.ple_n_snapshots)));
  }
  return n;
}

// Keeps the exports a host sent with an op's reply (wire::kExportAfter) for export_state.
void keep_sent(Instance& I, const HostProcess::Reply& r) {
  SentExports& s = I.host->sent;
  s.heads.clear();
  s.spans.clear();
  const std::vector<int32_t>& w = *r.slots;
  size_t at = 0, total = 0;
  while (at < w.size()) {
    s.heads.push_back(wire::read_words(w.data(), w.size(), &at));
    if (s.heads.back().layers.size() != I.layers.size())
      throw std::runtime_error("the host sent an export of " + std::to_string(s.heads.back().layers.size()) +
                               " layers with the reply; the model has " + std::to_string(I.layers.size()));
    const size_t n = export_arrays(s.heads.back());
    s.spans.emplace_back(total, total + n);  // after the op's outputs: moved below
    total += n;
  }
  if (total > r.arrays.size())
    throw std::runtime_error("the host sent " + std::to_string(r.arrays.size()) + " arrays with the reply; its " +
                             std::to_string(s.heads.size()) + " exports alone have " + std::to_string(total));
  s.op_arrays = r.arrays.size() - total;
  s.arrays = r.arrays;
  for (auto& [first, end] : s.spans) first += s.op_arrays, end += s.op_arrays;
  s.instance = I.id;
  s.generation = I.generation;
  s.valid = true;
}

// Keeps the field digests a host sent with an op's reply ("digests": [[slot, fields, rest], ...],
// each as field_digests answers) for field_digests.
void keep_digests(Instance& I, const json& all) {
  SentDigests& d = I.host->digests;
  d.by_slot.clear();
  if (!all.is_array()) throw std::runtime_error("'digests' must be a list of [slot, fields, rest]");
  for (const json& e : all) {
    if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer())
      throw std::runtime_error("each of 'digests' must be [slot, fields, rest], not " + wire::dump(e).substr(0, 200));
    d.by_slot[e[0].get<int>()] = json{{"fields", e[1]}, {"rest", e[2]}};
  }
  d.instance = I.id;
  d.generation = I.generation;
  d.valid = true;
}

// An op's call (wire::Op): a Compact record with its slots; JSON to a host that takes no records.
// With I.export_after the host sends the exports of the instance's slots with the reply (kept in
// the host's SentExports until the next call); with I.digests_after their field digests (kept in
// its SentDigests until a call that may change a slot). Either only when the caller read a state
// after the previous op (the lockstep reads after every op; `replay` only where its trace has a
// state), so that nothing is exported or digested for nobody.
int exchange_op(Instance& I, wire::Compact c, const int32_t* slots, const std::vector<Piece>& arrays, ssmp_error* err,
                const HostProcess::Reply** reply) {
  c.instance = I.id;
  const bool ask = I.read_after_op && !I.async_paused;
  I.read_after_op = false;
  c.status = ask && I.export_after ? wire::kExportAfter : 0;
  const bool digests = ask && I.digests_after;
  auto what = [&] { return what_of(wire::json_of(c, slots)); };
  const int rc = exchange_with(
      I,
      [&](HostProcess& proc) -> const HostProcess::Reply& {
        if (!digests) return proc.call(c, slots, arrays, what);
        json req = wire::json_of(c, slots);
        req["digests_after"] = true;
        return proc.call(req, arrays, what);
      },
      what, err, reply);
  if (rc != SSMP_OK) return rc;
  const bool sent_exports = (*reply)->compact && (*reply)->slots && !(*reply)->slots->empty();
  const bool sent_digests = digests && !(*reply)->compact && (*reply)->msg.contains("digests");
  if (!sent_exports && !sent_digests) return rc;
  try {
    if (sent_exports) keep_sent(I, **reply);
    else keep_digests(I, (*reply)->msg.at("digests"));
  } catch (const std::exception& e) {
    set_text(err->kind, sizeof err->kind, "");
    set_text(err->message, sizeof err->message, what() + ": " + e.what());
    return SSMP_ERROR;
  }
  return rc;
}

wire::Compact op_call(wire::Op op, int slot = -1) {
  wire::Compact c;
  c.op = uint32_t(op);
  c.slot = slot;
  return c;
}

int simple(wire::Compact c, void* p, ssmp_error* err) {
  const HostProcess::Reply* reply = nullptr;
  return exchange_op(self(p), c, nullptr, {}, err, &reply);
}

// Inputs of `entries` x layers: x, a, b, z each, then ple_tokens and ple_x at a layer hosting a
// PLE carry (ple: NULL for a model hosting none), into I.inputs.
const std::vector<Piece>& input_pieces(Instance& I, int entries, int rows, const ssmp_layer_io* io,
                                       const ssmp_ple_io* ple) {
  std::vector<Piece>& v = I.inputs;
  v.clear();
  for (int e = 0; e < entries; ++e)
    for (size_t l = 0; l < I.layers.size(); ++l) {
      const LayerSpec& L = I.layers[l];
      const size_t at = size_t(e) * I.layers.size() + l;
      const ssmp_layer_io& x = io[at];
      const size_t r = size_t(rows), b = input_width(L, &LayerRows::beta_in);
      v.push_back(floats(x.x, r * size_t(L.conv_dim())));
      v.push_back(floats(x.a, r * input_width(L, &LayerRows::dt_in)));
      v.push_back(b ? floats(x.b, r * b) : Piece{nullptr, 0});  // Mamba-2 has no b: an empty array
      v.push_back(floats(x.z, r * size_t(L.out_dim())));
      if (L.ple.hosted() && ple) {
        v.push_back(floats(ple[at].tokens, r));
        v.push_back(floats(ple[at].x, r * size_t(L.ple.channels)));
      }
    }
  return v;
}

// Copies the reply's outputs (per entry and layer: the output, then the PLE output at a layer
// hosting a carry) into io[].out and ple[].out.
void take_outputs(const Instance& I, int entries, int rows, const HostProcess::Reply& got, ssmp_layer_io* io,
                  const ssmp_ple_io* ple) {
  size_t want = 0;
  for (const LayerSpec& L : I.layers) want += L.ple.hosted() && ple ? 2 : 1;
  want *= size_t(entries);
  // the exports sent with the reply follow the outputs (kExportAfter)
  const size_t have = I.host->sent.valid ? I.host->sent.op_arrays : got.arrays.size();
  if (have != want)
    throw std::runtime_error("the host returned " + std::to_string(have) + " output arrays, expected " +
                             std::to_string(want) +
                             " (per entry and layer: the output, and the PLE output of a "
                             "layer hosting a carry)");
  size_t next = 0;
  auto take = [&](float* dst, size_t floats_n, size_t l, const char* what) {
    const size_t bytes = floats_n * sizeof(float);
    if (got.arrays[next].second != bytes)
      throw std::runtime_error("output " + std::to_string(next) + " (layer " + std::to_string(l) + " " + what +
                               ") from the host has " + std::to_string(got.arrays[next].second) + " bytes, expected " +
                               std::to_string(bytes) + " (float32)");
    std::memcpy(dst, got.arrays[next++].first, bytes);
  };
  for (int e = 0; e < entries; ++e)
    for (size_t l = 0; l < I.layers.size(); ++l) {
      const LayerSpec& L = I.layers[l];
      const size_t at = size_t(e) * I.layers.size() + l;
      take(io[at].out, size_t(rows) * size_t(L.out_dim()), l, "[rows][out_dim]");
      if (L.ple.hosted() && ple) take(ple[at].out, size_t(rows) * size_t(L.ple.channels), l, "PLE [rows][C]");
    }
}

// prefill, decode or verify: c with its slots (c.n_slots), the inputs and the outputs of `entries`
int with_outputs(wire::Compact c, const int* slots, void* p, int entries, int rows, ssmp_layer_io* io, ssmp_error* err,
                 const ssmp_ple_io* ple = nullptr) {
  Instance& I = self(p);
  const HostProcess::Reply* reply = nullptr;
  const int rc = exchange_op(I, c, slots, input_pieces(I, entries, rows, io, ple), err, &reply);
  if (rc != SSMP_OK) return rc;
  try {
    take_outputs(I, entries, rows, *reply, io, ple);
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  return SSMP_OK;
}

// create of host N (a table member has no context but its host's number).
void* create_on(Host& H, const char* options, ssmp_error* err) {
  try {
    const bool restart = H.proc.generation() > 0 && !H.proc.running();
    const json& hello = H.proc.start();
    if (restart && hello != H.declaration)
      throw std::runtime_error(H.proc.label() + ": its host, started again, declares something else than at first");
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return nullptr;
  }
  auto I = std::make_unique<Instance>();
  I->host = &H;
  I->generation = H.proc.generation();
  const HostProcess::Reply* reply = nullptr;
  if (exchange(*I, {{"call", "create"}, {"options", options ? options : ""}}, {}, err, &reply) != SSMP_OK)
    return nullptr;
  I->id = reply->msg.value("instance", int64_t(0));
  return I.release();
}

template <int N>
void* create_n(const char* options, ssmp_error* err) {
  return create_on(*hosts().at(N), options, err);
}
template <int... N>
constexpr std::array<void* (*)(const char*, ssmp_error*), sizeof...(N)> creates(std::integer_sequence<int, N...>) {
  return {create_n<N>...};
}
constexpr auto kCreates = creates(std::make_integer_sequence<int, kMaxHosts>());

void destroy(void* p) {
  Instance* I = static_cast<Instance*>(p);
  if (I->host->proc.running() && I->host->proc.generation() == I->generation) {
    ssmp_error err{};
    const HostProcess::Reply* reply = nullptr;
    exchange(*I, {{"call", "destroy"}}, {}, &err, &reply);
  }
  delete I;
}

// SSMCHECK_EXPORTS_WITH_OPS: on (the default) or off. Throws std::invalid_argument naming the
// variable for another value (before any case runs: hosted_plugin_table reads it).
bool exports_with_ops_setting() {
  const char* v = std::getenv("SSMCHECK_EXPORTS_WITH_OPS");
  const std::string text = v ? v : "";
  if (!text.empty() && text != "on" && text != "off")
    throw std::invalid_argument("SSMCHECK_EXPORTS_WITH_OPS is '" + text + "'; it takes on (the default) or off");
  return text != "off";
}

// What an instance's op calls ask its host to send with the reply on a model of `spec`
// (Host::with_ops): every claimed slot's export (wire::kExportAfter) from a
// host taking Compact records (a C host) where the lockstep reads states whole; their field
// digests ("digests_after") from a host of JSON calls (the Python host) where it reads them by
// field digests (plugin_backend.h). A C host's field digests stay calls: through the doorbell one
// costs tens of microseconds. Neither while the instance's async copies are paused (exchange_op:
// there an export releases a paused copy, so when it happens is what the campaign tests).
enum class SentWithOps { nothing, exports, digests };
SentWithOps sent_with_ops(const Host& H, const ModelSpec& spec) {
  if (!H.with_ops) return SentWithOps::nothing;
  const bool by_digests = offers_field_digests(H.table) && asks_field_digests(field_digests_use(), spec);
  if (H.proc.compact()) return by_digests ? SentWithOps::nothing : SentWithOps::exports;
  return by_digests ? SentWithOps::digests : SentWithOps::nothing;
}

int create_pool(void* p, const ssmp_config* c, ssmp_error* err) {
  Instance& I = self(p);
  I.export_after = I.digests_after = I.read_after_op = false;
  json layers = json::array();
  std::vector<Piece> w;
  I.layers.clear();
  Model m;
  try {
    // the shapes and weights (plugin/config_model.h): by name when the config has them
    m = has_layer_descs(c) ? model_of_descs(c) : model_of(c);
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  // each layer's description with its geometry, then its weights in the order the geometry names them
  for (size_t l = 0; l < m.spec.layers.size(); ++l) {
    const LayerSpec& L = m.spec.layers[l];
    const LayerWeights& W = m.weights[l];
    // the kind's shape parameters by the names files give them (LayerSpec::shape_params), then
    // what only one kind has
    json d = {{"kind", to_string(L.kind)}};
    for (const ShapeParam& p : L.shape_params()) d[p.name] = L.*p.member;
    if (L.kind == LayerKind::mamba2) {  // JSON has no infinity: an unbounded dt_max travels as null
      d["norm_before_gate"] = L.norm_before_gate;
      d["dt_min"] = L.dt_min;
      d["dt_max"] = std::isinf(L.dt_max) ? json(nullptr) : json(L.dt_max);
    } else {
      d["output_gate"] = L.output_gate == OutputGate::sigmoid ? "sigmoid" : "silu";
    }
    d["d_conv"] = L.d_conv;
    d["eps"] = L.eps;
    d["conv_bias"] = L.conv_bias;
    d["ple"] = L.ple.hosted() ? json{{"channels", L.ple.channels}, {"ngram_size", L.ple.ngram_size},
                                     {"k_size", L.ple.k_size}, {"dilation", L.ple.dilation}, {"eos_id", L.ple.eos_id}}
                              : json(nullptr);
    // the layer's geometry as core states it once (core/layer_geometry.cpp), so the Python side
    // restates no formula: conv channels, output width, h's shape, the per-token inputs and the
    // weights by name, the weights following in that order, and the shapes of the state's fields
    // by their names in traces (docs/trace-format.md; the checkpoint, intermediates and snapshots
    // of a field have its shape). "state" was added later: a peer that does not read it ignores it.
    json state = {{"h", h_shape(L)}, {"conv", conv_shape(L)}};
    if (L.ple.hosted()) {
      state["ple_history"] = ple_history_shape(L);
      state["ple_conv"] = ple_conv_shape(L);
    }
    json inputs = json::array(), weights = json::array();
    for (const InputField& f : L.inputs()) inputs.push_back({f.name, f.width});
    for (const WeightField& f : L.weights()) {
      weights.push_back({f.name, f.shape});
      const std::vector<float>& v = W.*f.member;
      w.push_back(floats(v.data(), v.size()));  // m outlives the call
    }
    // the layer by name (core/layer_attrs.h, the trace's attributes), from which the host rebuilds it
    // whatever its kind; added later, like "state"
    json attrs = json::object();
    for (const LayerAttr& a : layer_attrs(L)) attrs[a.name] = a.value;
    d["attrs"] = attrs;
    d["geometry"] = {{"conv_dim", L.conv_dim()}, {"out_dim", L.out_dim()}, {"h_shape", L.h_shape()},
                     {"inputs", inputs},         {"weights", weights},     {"state", state}};
    layers.push_back(std::move(d));
  }
  I.layers = m.spec.layers;
  const char* mode = c->h_mode == SSMP_H_F16 ? "f16" : c->h_mode == SSMP_H_F16_POOL ? "f16-pool" : "f32";
  json req = {{"call", "create_pool"},
              {"model_name", c->model_name ? c->model_name : ""},
              {"layers", layers},
              {"h_mode", mode},
              {"max_slots", c->max_slots},
              {"h_capacity", std::vector<int>(c->h_capacity, c->h_capacity + c->max_slots)},
              {"conv_capacity", c->conv_capacity},
              {"snapshot_slots", c->snapshot_slots}};
  const HostProcess::Reply* reply = nullptr;
  const int rc = exchange(I, req, w, err, &reply);
  if (rc != SSMP_OK) return rc;
  try {
    const SentWithOps sent = sent_with_ops(*I.host, m.spec);
    I.export_after = sent == SentWithOps::exports;
    I.digests_after = sent == SentWithOps::digests;
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  return rc;
}

int alloc(void* p, int min_capacity, int* slot, ssmp_error* err) {
  wire::Compact c = op_call(wire::Op::alloc);
  c.arg = min_capacity;
  const HostProcess::Reply* reply = nullptr;
  const int rc = exchange_op(self(p), c, nullptr, {}, err, &reply);
  if (rc == SSMP_OK) *slot = reply->compact ? reply->c.slot : reply->msg.value("slot", -1);
  return rc;
}

int release(void* p, int slot, ssmp_error* err) { return simple(op_call(wire::Op::release, slot), p, err); }

wire::Compact rows_op(wire::Op op, int slot, int n, int rows, int arm) {
  wire::Compact c = op_call(op, slot);
  c.rows = rows;
  c.n_slots = uint32_t(n);
  c.arg = arm;
  return c;
}

int prefill(void* p, int slot, int rows, ssmp_layer_io* io, ssmp_error* err) {
  return with_outputs(rows_op(wire::Op::prefill, slot, 0, rows, 0), nullptr, p, 1, rows, io, err);
}

int decode(void* p, int n, const int* slots, ssmp_layer_io* io, ssmp_error* err) {
  return with_outputs(rows_op(wire::Op::decode, -1, n, 1, 0), slots, p, n, 1, io, err);
}

int verify(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, ssmp_error* err) {
  return with_outputs(rows_op(wire::Op::verify, -1, n, k, arm), slots, p, n, k, io, err);
}

int prefill_ple(void* p, int slot, int rows, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  return with_outputs(rows_op(wire::Op::prefill, slot, 0, rows, 0), nullptr, p, 1, rows, io, err, ple);
}

int decode_ple(void* p, int n, const int* slots, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  return with_outputs(rows_op(wire::Op::decode, -1, n, 1, 0), slots, p, n, 1, io, err, ple);
}

int verify_ple(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, const ssmp_ple_io* ple,
               ssmp_error* err) {
  return with_outputs(rows_op(wire::Op::verify, -1, n, k, arm), slots, p, n, k, io, err, ple);
}

int checkpoint(void* p, int slot, int async, ssmp_error* err) {
  wire::Compact c = op_call(wire::Op::checkpoint, slot);
  c.arg = async != 0;
  return simple(c, p, err);
}
int commit(void* p, int slot, int n, int k, ssmp_error* err) {
  wire::Compact c = op_call(wire::Op::commit, slot);
  c.n = n;
  c.k = k;
  return simple(c, p, err);
}
int rollback(void* p, int slot, int n, int and_checkpoint, ssmp_error* err) {
  wire::Compact c = op_call(wire::Op::rollback, slot);
  c.n = n;
  c.arg = and_checkpoint != 0;
  return simple(c, p, err);
}
int to_f16(void* p, int slot, ssmp_error* err) { return simple(op_call(wire::Op::to_f16, slot), p, err); }
int snapshot_save(void* p, int slot, int snap, ssmp_error* err) {
  wire::Compact c = op_call(wire::Op::snapshot_save, slot);
  c.arg = snap;
  return simple(c, p, err);
}
int snapshot_restore(void* p, int slot, int snap, ssmp_error* err) {
  wire::Compact c = op_call(wire::Op::snapshot_restore, slot);
  c.arg = snap;
  return simple(c, p, err);
}

// Fills *st from an export: its head, and its arrays from got[first] on in the order of
// export_state's reply (wire::ExportHead); returns the index past its last array.
size_t fill_export(const Instance& I, const wire::ExportHead& head,
                   const std::vector<std::pair<const char*, uint64_t>>& got, size_t first, ssmp_state* st) {
  if (st->n_layers != int(I.layers.size())) throw std::runtime_error("export of another model's layer count");
  if (head.layers.size() != I.layers.size())
    throw std::runtime_error("export_state: 'layers' must list " + std::to_string(I.layers.size()) + " layers");
  size_t next = first;
  int layer = -1;  // the layer being read, for messages (built only when one is needed: this runs per op)
  auto at = [&] { return layer < 0 ? std::string() : "layer " + std::to_string(layer) + " "; };
  // "layer 0 h", "layer 1 h_intermediate 2", "layer 0 ple_snapshot 1 history"
  auto name = [&](const char* field, int index, const char* part) {
    return at() + field + (index >= 0 ? " " + std::to_string(index) : "") + (part ? std::string(" ") + part : "");
  };
  auto take = [&](void* dst, size_t elems, bool f16, const char* field, int index = -1, const char* part = nullptr) {
    if (next >= got.size()) throw std::runtime_error("export_state: no array for " + name(field, index, part));
    const size_t bytes = elems * (f16 ? 2 : 4);
    if (got[next].second != bytes)
      throw std::runtime_error("export_state: " + name(field, index, part) + " has " +
                               std::to_string(got[next].second) + " bytes, expected " + std::to_string(bytes) +
                               (f16 ? " (float16)" : " (float32)"));
    std::memcpy(dst, got[next].first, bytes);
    ++next;
  };
  st->last_verify_k = head.last_verify_k;
  for (size_t l = 0; l < I.layers.size(); ++l) {
    const LayerSpec& L = I.layers[l];
    const wire::ExportedLayer& j = head.layers[l];
    ssmp_layer_state& o = st->layers[l];
    layer = int(l);
    o.h_is_f16 = j.h_is_f16;
    o.has_h_checkpoint = j.has_h_checkpoint;
    o.h_checkpoint_is_f16 = j.h_checkpoint_is_f16;
    o.has_conv_checkpoint = j.has_conv_checkpoint;
    o.n_h_intermediates = j.n_h_intermediates;
    o.n_conv_intermediates = j.n_conv_intermediates;
    o.h_intermediates_are_f16 = j.h_intermediates_are_f16;
    if (o.n_h_intermediates < 0 || o.n_h_intermediates > o.h_intermediate_room || o.n_conv_intermediates < 0 ||
        o.n_conv_intermediates > o.conv_intermediate_room)
      throw std::runtime_error("export_state: " + at() + "has " + std::to_string(o.n_h_intermediates) + " h and " +
                               std::to_string(o.n_conv_intermediates) + " conv intermediates; room for " +
                               std::to_string(o.h_intermediate_room) + " and " +
                               std::to_string(o.conv_intermediate_room));
    const size_t conv =
        size_t(L.conv_dim()) * size_t(L.d_conv - ((I.host->table.flags & SSMP_CONV_WINDOW_D_CONV_MINUS_1) ? 1 : 0));
    const size_t h = size_t(L.h_elems());
    take(o.h, h, o.h_is_f16, "h");
    take(o.conv, conv, false, "conv");
    if (o.has_h_checkpoint) take(o.h_checkpoint, h, o.h_checkpoint_is_f16, "h_checkpoint");
    if (o.has_conv_checkpoint) take(o.conv_checkpoint, conv, false, "conv_checkpoint");
    for (int t = 0; t < o.n_h_intermediates; ++t)
      take(o.h_intermediates[t], h, o.h_intermediates_are_f16, "h_intermediate", t);
    for (int t = 0; t < o.n_conv_intermediates; ++t) take(o.conv_intermediates[t], conv, false, "conv_intermediate", t);
    if (!L.ple.hosted() || !st->ple) continue;  // a carry: live, checkpoint, snapshots, each history then conv
    if (!j.has_ple) throw std::runtime_error("export_state: " + at() + "hosts a PLE carry; the export has none");
    ssmp_ple_state& P = st->ple[l];
    P.has_live = j.ple_has_live;
    P.has_checkpoint = j.ple_has_checkpoint;
    P.n_snapshots = j.ple_n_snapshots;
    if (P.n_snapshots < 0 || P.n_snapshots > P.snapshot_room)
      throw std::runtime_error("export_state: " + at() + "has " + std::to_string(P.n_snapshots) +
                               " PLE snapshots; room for " + std::to_string(P.snapshot_room));
    const size_t pc = size_t(L.ple.conv_rows()) * size_t(L.ple.channels);
    auto carry = [&](const ssmp_ple_carry& c, const char* what, int index) {
      take(c.history, size_t(L.ple.history_len()), false, what, index, "history");
      take(c.conv, pc, false, what, index, "conv");
    };
    if (P.has_live) carry(P.live, "ple", -1);
    if (P.has_checkpoint) carry(P.checkpoint, "ple_checkpoint", -1);
    for (int t = 0; t < P.n_snapshots; ++t) carry(P.snapshots[t], "ple_snapshot", t);
  }
  layer = -1;
  st->has_prefill_stage = head.has_prefill_stage;
  if (st->has_prefill_stage) {
    if (!st->h_prefill_stage) throw std::runtime_error("export_state: a prefill stage outside f16-pool mode");
    take(st->h_prefill_stage, size_t(st->stage_elems), false, "h_prefill_stage");
  }
  return next;
}

// Export: from the exports sent with the last op's reply when they hold the slot and no call came
// since (wire::kExportAfter), else a call; the reply says which fields it has (wire::ExportHead).
int export_state(void* p, int slot, ssmp_state* st, ssmp_error* err) {
  Instance& I = self(p);
  I.read_after_op = true;
  try {
    const SentExports& s = I.host->sent;
    if (s.valid && s.instance == I.id && s.generation == I.generation)
      for (size_t k = 0; k < s.heads.size(); ++k)
        if (s.heads[k].slot == slot) {
          if (fill_export(I, s.heads[k], s.arrays, s.spans[k].first, st) != s.spans[k].second)
            throw std::runtime_error("export_state: the export sent with the reply has arrays its head does not name");
          return SSMP_OK;
        }
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  const HostProcess::Reply* r = nullptr;
  const int rc = exchange(I, {{"call", "export_state"}, {"slot", slot}}, {}, err, &r, Reads::state_only);
  if (rc != SSMP_OK) return rc;
  try {
    const size_t end = fill_export(I, wire::export_head(r->msg, I.layers.size()), r->arrays, 0, st);
    if (end != r->arrays.size())
      throw std::runtime_error("export_state: " + std::to_string(r->arrays.size() - end) +
                               " arrays more than its fields");
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  return SSMP_OK;
}

// Optional async members, for a host whose implementation has them ("async": true in hello).
int pause_async_copies(void* p, int on) {
  Instance& I = self(p);
  ssmp_error err{};
  const HostProcess::Reply* reply = nullptr;
  if (exchange(I, {{"call", "pause_async_copies"}, {"on", on != 0}}, {}, &err, &reply) != SSMP_OK) return 0;
  const int supported = reply->msg.value("supported", 0);
  I.async_paused = on && supported;  // exports are no longer sent with ops' replies (exchange_op)
  return supported;
}
int async_pending(void* p, int slot) {
  ssmp_error err{};
  const HostProcess::Reply* reply = nullptr;
  if (exchange(self(p), {{"call", "async_pending"}, {"slot", slot}}, {}, &err, &reply) != SSMP_OK) return 0;
  return reply->msg.value("pending", 0);
}

// Optional perturbed schedule, for a host whose implementation has it ("perturbable": true in hello).
int perturb_schedule(void* p, uint64_t seed) {
  ssmp_error err{};
  const HostProcess::Reply* reply = nullptr;
  if (exchange(self(p), {{"call", "perturb_schedule"}, {"seed", seed}}, {}, &err, &reply) != SSMP_OK) return 0;
  return reply->msg.value("on", 0);
}

// Optional field digests, for a host whose implementation has them ("field_digests": true in
// hello): the reply lists the present fields as [name, layer, index, is_f16, digest] and the rest
// digest; each is matched to this call's fields by name, layer and index (the others are absent).
// Answered from the digests sent with the last op's reply when they hold the slot (SentDigests).
int field_digests(void* p, int slot, int n_fields, ssmp_field* fields, uint64_t* digests, ssmp_error* err) {
  Instance& I = self(p);
  I.read_after_op = true;
  const SentDigests& sent = I.host->digests;
  const json* answer = nullptr;
  if (sent.valid && sent.instance == I.id && sent.generation == I.generation) {
    const auto it = sent.by_slot.find(slot);
    if (it != sent.by_slot.end()) answer = &it->second;
  }
  if (!answer) {
    const HostProcess::Reply* r = nullptr;
    const int rc = exchange(I, {{"call", "field_digests"}, {"slot", slot}}, {}, err, &r, Reads::state_only);
    if (rc != SSMP_OK) return rc;
    answer = &r->msg;
  }
  try {
    std::map<std::tuple<std::string, int, int>, std::pair<bool, uint64_t>> got;
    for (const json& f : answer->at("fields")) {
      if (!f.is_array() || f.size() != 5)
        throw std::runtime_error("each of 'fields' must be [name, layer, index, is_f16, digest], not " + f.dump());
      got[{f[0].get<std::string>(), f[1].get<int>(), f[2].get<int>()}] = {f[3].get<bool>(), f[4].get<uint64_t>()};
    }
    for (int i = 0; i < n_fields; ++i) {
      ssmp_field& f = fields[i];
      const auto it = got.find({f.name, f.layer, f.index});
      f.present = it != got.end() ? 1 : 0;
      f.is_f16 = f.present && it->second.first ? 1 : 0;
      if (f.present) {
        digests[i] = it->second.second;
        got.erase(it);
      }
    }
    if (!got.empty()) {
      const auto& [name, layer, index] = got.begin()->first;
      throw std::runtime_error("the reply has a field this pool has no room for: " + name + " of layer " +
                               std::to_string(layer) + ", index " + std::to_string(index));
    }
    digests[n_fields] = answer->at("rest").get<uint64_t>();
  } catch (const std::exception& e) {
    set_text(err->kind, sizeof err->kind, "");
    set_text(err->message, sizeof err->message, std::string("field_digests: ") + e.what());
    return SSMP_ERROR;
  }
  return SSMP_OK;
}

// The fields asked for by name, for a host with field digests (PluginBackend::export_update asks
// for the changed ones only): the reply gives [present, is_f16] per field in the order asked and
// the arrays of the present ones, each checked against the field's size and copied into its buffer.
int export_fields(void* p, int slot, int n_fields, ssmp_field* fields, int* last_verify_k, ssmp_error* err) {
  json want = json::array();
  for (int i = 0; i < n_fields; ++i) want.push_back({fields[i].name, fields[i].layer, fields[i].index});
  const HostProcess::Reply* r = nullptr;
  const int rc = exchange(self(p), {{"call", "export_fields"}, {"slot", slot}, {"fields", std::move(want)}}, {}, err,
                          &r, Reads::state_only);
  if (rc != SSMP_OK) return rc;
  try {
    const json& answers = r->msg.at("fields");
    if (!answers.is_array() || int(answers.size()) != n_fields)
      throw std::runtime_error("'fields' must have " + std::to_string(n_fields) + " answers [present, is_f16]");
    size_t next = 0;
    for (int i = 0; i < n_fields; ++i) {
      ssmp_field& f = fields[i];
      f.present = answers[size_t(i)].at(0).get<bool>() ? 1 : 0;
      f.is_f16 = f.present && answers[size_t(i)].at(1).get<bool>() ? 1 : 0;
      if (!f.present) continue;
      int64_t elems = 1;
      for (int d = 0; d < f.rank; ++d) elems *= f.dims[d];
      const size_t bytes = size_t(elems) * (f.is_f16 ? 2 : 4);
      const std::string what =
          std::string(f.name) + " of layer " + std::to_string(f.layer) + ", index " + std::to_string(f.index);
      if (next >= r->arrays.size()) throw std::runtime_error("no array for " + what);
      if (r->arrays[next].second != bytes)
        throw std::runtime_error(what + " has " + std::to_string(r->arrays[next].second) + " bytes, expected " +
                                 std::to_string(bytes));
      std::memcpy(f.data, r->arrays[next].first, bytes);
      ++next;
    }
    if (next != r->arrays.size())
      throw std::runtime_error(std::to_string(r->arrays.size() - next) + " arrays more than its fields");
    *last_verify_k = r->msg.at("last_verify_k").get<int>();
  } catch (const std::exception& e) {
    set_text(err->kind, sizeof err->kind, "");
    set_text(err->message, sizeof err->message, std::string("export_fields: ") + e.what());
    return SSMP_ERROR;
  }
  return SSMP_OK;
}

// The flags a hello declares: "flags" (a C host passes its plug-in's, less SSMP_BY_NAME: the host
// speaks it to its plug-in, and this table forwards the positional calls; hosted_plugin_by_name
// tells), or the string attributes of a Python class (bridge.py's declared()).
uint32_t declared_flags(const json& hello) {
  if (hello.contains("flags")) return hello.at("flags").get<uint32_t>() & ~uint32_t(SSMP_BY_NAME);
  // key, the contract's value, the other value (core/conventions.h's names), and the flag the other sets
  struct Choice {
    const char* key;
    const char* contract;
    const char* other;
    uint32_t flag;
  };
  static const Choice choices[] = {
      {"conv_window", to_string(ConvWindow::d_conv), to_string(ConvWindow::d_conv_minus_1),
       SSMP_CONV_WINDOW_D_CONV_MINUS_1},
      {"h_layout", to_string(HLayout::kd_vd), to_string(HLayout::vd_kd), SSMP_H_VD_KD},
      {"gates", to_string(GateMath::clamped), to_string(GateMath::torch), SSMP_GATES_TORCH},
      {"f16_store", to_string(F16Store::saturate), to_string(F16Store::inf), SSMP_F16_STORE_INF},
      {"f16_rows", to_string(F16Rows::stored), to_string(F16Rows::carried), SSMP_F16_ROWS_CARRIED},
  };
  uint32_t flags = (hello.value("own_legality", false) ? SSMP_OWN_LEGALITY : 0) |
                   (hello.value("bitwise", false) ? SSMP_BITWISE : 0) |
                   (hello.value("prefill_stage", true) ? 0 : SSMP_NO_PREFILL_STAGE) |
                   (hello.value("mamba2", false) ? SSMP_MAMBA2 : 0) | (hello.value("ple", false) ? SSMP_PLE : 0);
  for (const Choice& c : choices) {
    const std::string v = hello.value(c.key, std::string(c.contract));
    if (v != c.contract && v != c.other)
      throw std::runtime_error(std::string("the Python side declares ") + c.key + " '" + v + "' (expected " +
                               c.contract + " or " + c.other + ")");
    if (v == c.other) flags |= c.flag;
  }
  return flags;
}

std::filesystem::path plugin_host_executable() {
  if (const char* e = std::getenv("SSMCHECK_PLUGIN_HOST"); e && *e) return e;
  std::error_code ec;
  const std::filesystem::path beside = self_executable().parent_path() / "ssmcheck-plugin-host";
  if (std::filesystem::exists(beside, ec)) return beside;
  return SSMCHECK_BUILD_PLUGIN_HOST;
}

}  // namespace

bool hosted_plugin_by_name(const ssmp_plugin* table) {
  for (const auto& H : hosts())
    if (&H->table == table) return H->declaration.value("flags", uint32_t(0)) & SSMP_BY_NAME;
  return false;
}

const ssmp_plugin* hosted_plugin_table(HostLaunch launch) {
  if (int(hosts().size()) >= kMaxHosts)
    throw std::runtime_error(launch.label + ": more than " + std::to_string(kMaxHosts) + " hosted plug-ins in one process");
  auto H = std::make_unique<Host>(std::move(launch));
  H->with_ops = exports_with_ops_setting();
  H->declaration = H->proc.start();
  const json& hello = H->declaration;
  H->name = hello.value("name", std::string("hosted"));
  ssmp_plugin& t = H->table;
  t = ssmp_plugin{SSMP_ABI_VERSION,
                  sizeof(ssmp_plugin),
                  H->name.c_str(),
                  declared_flags(hello),
                  kCreates[hosts().size()],
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
                  nullptr,
                  nullptr,
                  prefill_ple,
                  decode_ple,
                  verify_ple,
                  nullptr,
                  nullptr,
                  nullptr,
                  nullptr,
                  nullptr};
  if (hello.value("async", false)) {
    t.pause_async_copies = pause_async_copies;
    t.async_pending = async_pending;
  }
  if (hello.value("perturbable", false)) t.perturb_schedule = perturb_schedule;
  if (hello.value("field_digests", false)) {  // and the changed fields read by name
    t.field_digests = field_digests;
    t.export_fields = export_fields;
  }
  if (hello.contains("capabilities")) {
    H->capabilities = capabilities_from_json(hello.at("capabilities"), H->proc.label());
    t.capabilities = &H->capabilities;
  }
  hosts().push_back(std::move(H));
  return &t;
}

HostLaunch c_plugin_launch(const std::string& path, const std::string& label) {
  const std::filesystem::path host = plugin_host_executable();
  std::error_code ec;
  if (host.empty() || !std::filesystem::exists(host, ec))
    throw std::runtime_error(label + ": ssmcheck-plugin-host, which runs plug-ins in their own process, is not "
                             "beside this executable; set SSMCHECK_PLUGIN_HOST to it, or run the plug-in in "
                             "ssmcheck's process with plugin-in-process:" + path + " (debugging only)");
  return {label, {host.string(), path}, {}, /*bell=*/true};
}

HostLaunch python_launch(const std::string& name) {
  const char* argv_json = std::getenv("SSMCHECK_PYTHON_HOST");
  const char* cls = std::getenv("SSMCHECK_PYTHON_CLASS");
  if (!argv_json || !*argv_json || !cls || !*cls)
    throw std::runtime_error(
        "python: backends are served by the Python bridge: run ssmcheck through ssmcheck.run(...) of "
        "python/ssmcheck (docs/plugins.md, \"Python\"); SSMCHECK_PYTHON_HOST and SSMCHECK_PYTHON_CLASS are not set");
  HostLaunch l;
  l.label = name;
  try {
    l.argv = json::parse(argv_json).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("SSMCHECK_PYTHON_HOST is not a JSON list of strings: ") + e.what());
  }
  if (l.argv.empty()) throw std::runtime_error("SSMCHECK_PYTHON_HOST is an empty list");
  l.bell = true;  // not for frames (the Python host's go through the socket): for Bell::exporting
  return l;
}

}  // namespace ssm::plugin
