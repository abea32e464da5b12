// A plug-in served by another process over two pipes (see pipe_plugin.h).
#include "plugin/pipe_plugin.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "plugin/config_model.h"

namespace ssm::plugin {

namespace {

using nlohmann::json;
using Blob = std::string;  // raw bytes

struct Conn {
  int rfd = -1, wfd = -1;
};
Conn g_conn;
std::string g_name;
ssmp_plugin g_table;

void write_all(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(g_conn.wfd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error("the Python side is gone (writing to it failed: " + std::string(strerror(errno)) + ")");
    c += w;
    n -= size_t(w);
  }
}

void read_all(void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(g_conn.rfd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw std::runtime_error("the Python side closed the pipe (did its process die?)");
    if (r < 0) throw std::runtime_error("reading from the Python side failed: " + std::string(strerror(errno)));
    c += r;
    n -= size_t(r);
  }
}

void send(const json& j, const std::vector<const Blob*>& blobs) {
  const std::string text = j.dump();
  const uint64_t n = text.size();
  write_all(&n, sizeof n);
  write_all(text.data(), text.size());
  const uint32_t count = uint32_t(blobs.size());
  write_all(&count, sizeof count);
  for (const Blob* b : blobs) {
    const uint64_t len = b->size();
    write_all(&len, sizeof len);
    write_all(b->data(), b->size());
  }
}

// Replies are bounded so that a confused peer cannot make ssmcheck allocate without limit.
constexpr uint64_t kMaxMessage = uint64_t(1) << 34;

json receive(std::vector<Blob>* blobs) {
  uint64_t n = 0;
  read_all(&n, sizeof n);
  if (n > kMaxMessage) throw std::runtime_error("the Python side sent a message of " + std::to_string(n) + " bytes");
  std::string text(n, '\0');
  read_all(text.data(), n);
  uint32_t count = 0;
  read_all(&count, sizeof count);
  blobs->clear();
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t len = 0;
    read_all(&len, sizeof len);
    if (len > kMaxMessage) throw std::runtime_error("the Python side sent an array of " + std::to_string(len) + " bytes");
    Blob b(len, '\0');
    read_all(b.data(), len);
    blobs->push_back(std::move(b));
  }
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the Python side sent malformed JSON: ") + e.what());
  }
}

Blob floats(const float* p, size_t n) { return Blob(reinterpret_cast<const char*>(p), n * sizeof(float)); }

void set_text(char* dst, size_t n, const std::string& s) {
  std::strncpy(dst, s.c_str(), n - 1);
  dst[n - 1] = '\0';
}

// The width of a per-token input of layer s, 0 when its kind has none (core/layer_geometry.cpp).
size_t input_width(const LayerSpec& s, std::vector<float> LayerRows::*member) {
  for (const InputField& f : s.inputs())
    if (f.member == member) return size_t(f.width);
  return 0;
}

struct Instance {
  int64_t id = 0;
  std::vector<LayerSpec> layers;  // the pool's model (create_pool), whose geometry sizes every array
};
Instance& self(void* p) { return *static_cast<Instance*>(p); }

// One call: sends the request, reads the reply, maps its status; reply blobs in *out.
int exchange(json req, const std::vector<const Blob*>& blobs, ssmp_error* err, json* reply, std::vector<Blob>* out) {
  try {
    send(req, blobs);
    *reply = receive(out);
    const int status = reply->value("status", -1);
    if (status == SSMP_OK) return SSMP_OK;
    set_text(err->kind, sizeof err->kind, reply->value("kind", ""));
    set_text(err->message, sizeof err->message, reply->value("message", ""));
    return status == SSMP_REFUSED ? SSMP_REFUSED : SSMP_ERROR;
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
}

int simple(const char* call, void* p, json args, ssmp_error* err) {
  args["call"] = call;
  args["instance"] = self(p).id;
  json reply;
  std::vector<Blob> out;
  return exchange(args, {}, err, &reply, &out);
}

// Inputs of `entries` x layers into blobs x, a, b, z each, then ple_tokens and ple_x at a layer
// hosting a PLE carry (ple: NULL for a model hosting none).
std::vector<Blob> input_blobs(const Instance& I, int entries, int rows, const ssmp_layer_io* io,
                              const ssmp_ple_io* ple) {
  std::vector<Blob> v;
  for (int e = 0; e < entries; ++e)
    for (size_t l = 0; l < I.layers.size(); ++l) {
      const LayerSpec& L = I.layers[l];
      const size_t at = size_t(e) * I.layers.size() + l;
      const ssmp_layer_io& x = io[at];
      const size_t r = size_t(rows), b = input_width(L, &LayerRows::b);
      v.push_back(floats(x.x, r * size_t(L.conv_dim())));
      v.push_back(floats(x.a, r * input_width(L, &LayerRows::a)));
      v.push_back(b ? floats(x.b, r * b) : Blob());  // Mamba-2 has no b: an empty array
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
void take_outputs(const Instance& I, int entries, int rows, const std::vector<Blob>& got, ssmp_layer_io* io,
                  const ssmp_ple_io* ple) {
  size_t want = 0;
  for (const LayerSpec& L : I.layers) want += L.ple.hosted() && ple ? 2 : 1;
  want *= size_t(entries);
  if (got.size() != want)
    throw std::runtime_error("the Python side returned " + std::to_string(got.size()) + " output arrays, expected " +
                             std::to_string(want) + " (per entry and layer: the output, and the PLE output of a "
                             "layer hosting a carry)");
  size_t next = 0;
  auto take = [&](float* dst, size_t floats_n, const std::string& what) {
    const size_t bytes = floats_n * sizeof(float);
    if (got[next].size() != bytes)
      throw std::runtime_error("output " + std::to_string(next) + " (" + what + ") from the Python side has " +
                               std::to_string(got[next].size()) + " bytes, expected " + std::to_string(bytes) +
                               " (float32)");
    std::memcpy(dst, got[next++].data(), bytes);
  };
  for (int e = 0; e < entries; ++e)
    for (size_t l = 0; l < I.layers.size(); ++l) {
      const LayerSpec& L = I.layers[l];
      const size_t at = size_t(e) * I.layers.size() + l;
      take(io[at].out, size_t(rows) * size_t(L.out_dim()), "layer " + std::to_string(l) + " [rows][out_dim]");
      if (L.ple.hosted() && ple)
        take(ple[at].out, size_t(rows) * size_t(L.ple.channels), "layer " + std::to_string(l) + " PLE [rows][C]");
    }
}

int with_outputs(json req, void* p, int entries, int rows, ssmp_layer_io* io, ssmp_error* err,
                 const ssmp_ple_io* ple = nullptr) {
  const Instance& I = self(p);
  req["instance"] = I.id;
  const std::vector<Blob> in = input_blobs(I, entries, rows, io, ple);
  std::vector<const Blob*> ptrs;
  for (const Blob& b : in) ptrs.push_back(&b);
  json reply;
  std::vector<Blob> out;
  const int rc = exchange(req, ptrs, err, &reply, &out);
  if (rc != SSMP_OK) return rc;
  try {
    take_outputs(I, entries, rows, out, io, ple);
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  return SSMP_OK;
}

void* create(const char* options, ssmp_error* err) {
  json reply;
  std::vector<Blob> out;
  if (exchange({{"call", "create"}, {"options", options ? options : ""}}, {}, err, &reply, &out) != SSMP_OK)
    return nullptr;
  auto* I = new Instance;
  I->id = reply.value("instance", int64_t(0));
  return I;
}

void destroy(void* p) {
  ssmp_error err{};
  try {
    simple("destroy", p, json::object(), &err);
  } catch (...) {
  }
  delete static_cast<Instance*>(p);
}

int create_pool(void* p, const ssmp_config* c, ssmp_error* err) {
  Instance& I = self(p);
  json layers = json::array();
  std::vector<Blob> w;
  I.layers.clear();
  Model m;
  try {
    m = model_of(c);  // the shapes and weights (plugin/config_model.h)
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  // each layer's description, then its weights in this order: conv_w, [conv_bias], A_log,
  // dt_bias, norm_w, [D (Mamba-2)], [ple_w (a PLE carry)]
  for (size_t l = 0; l < m.spec.layers.size(); ++l) {
    const LayerSpec& L = m.spec.layers[l];
    const LayerWeights& W = m.weights[l];
    if (L.kind == LayerKind::mamba2)  // JSON has no infinity: an unbounded dt_max travels as null
      layers.push_back({{"kind", "mamba2"}, {"nh", L.nh}, {"hp", L.hp}, {"ns", L.ns}, {"ng", L.ng},
                        {"norm_before_gate", L.norm_before_gate}, {"dt_min", L.dt_min},
                        {"dt_max", std::isinf(L.dt_max) ? json(nullptr) : json(L.dt_max)}});
    else
      layers.push_back({{"kind", "gdn"}, {"nk", L.nk}, {"nv", L.nv}, {"kd", L.kd}, {"vd", L.vd},
                        {"output_gate", L.output_gate == OutputGate::sigmoid ? "sigmoid" : "silu"}});
    json& d = layers.back();
    d["d_conv"] = L.d_conv;
    d["eps"] = L.eps;
    d["conv_bias"] = L.conv_bias;
    d["ple"] = L.ple.hosted() ? json{{"channels", L.ple.channels}, {"ngram_size", L.ple.ngram_size},
                                     {"k_size", L.ple.k_size}, {"dilation", L.ple.dilation}, {"eos_id", L.ple.eos_id}}
                              : json(nullptr);
    for (const std::vector<float>* v : {&W.conv_w, &W.conv_bias, &W.A_log, &W.dt_bias, &W.norm_w, &W.D, &W.ple_w})
      if (!v->empty()) w.push_back(floats(v->data(), v->size()));
  }
  I.layers = m.spec.layers;
  const char* mode = c->h_mode == SSMP_H_F16 ? "f16" : c->h_mode == SSMP_H_F16_POOL ? "f16-pool" : "f32";
  json req = {{"call", "create_pool"},
              {"instance", I.id},
              {"model_name", c->model_name ? c->model_name : ""},
              {"layers", layers},
              {"h_mode", mode},
              {"max_slots", c->max_slots},
              {"h_capacity", std::vector<int>(c->h_capacity, c->h_capacity + c->max_slots)},
              {"conv_capacity", c->conv_capacity},
              {"snapshot_slots", c->snapshot_slots}};
  std::vector<const Blob*> ptrs;
  for (const Blob& b : w) ptrs.push_back(&b);
  json reply;
  std::vector<Blob> out;
  return exchange(req, ptrs, err, &reply, &out);
}

int alloc(void* p, int min_capacity, int* slot, ssmp_error* err) {
  json reply;
  std::vector<Blob> out;
  const int rc =
      exchange({{"call", "alloc"}, {"instance", self(p).id}, {"min_capacity", min_capacity}}, {}, err, &reply, &out);
  if (rc == SSMP_OK) *slot = reply.value("slot", -1);
  return rc;
}

int release(void* p, int slot, ssmp_error* err) { return simple("release", p, {{"slot", slot}}, err); }

int prefill(void* p, int slot, int rows, ssmp_layer_io* io, ssmp_error* err) {
  return with_outputs({{"call", "prefill"}, {"slot", slot}, {"rows", rows}}, p, 1, rows, io, err);
}

int decode(void* p, int n, const int* slots, ssmp_layer_io* io, ssmp_error* err) {
  return with_outputs({{"call", "decode"}, {"slots", std::vector<int>(slots, slots + n)}}, p, n, 1, io, err);
}

int verify(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, ssmp_error* err) {
  return with_outputs({{"call", "verify"},
                       {"slots", std::vector<int>(slots, slots + n)},
                       {"k", k},
                       {"arm", arm == SSMP_ARM_WY ? "wy" : "exact"}},
                      p, n, k, io, err);
}

int prefill_ple(void* p, int slot, int rows, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  return with_outputs({{"call", "prefill"}, {"slot", slot}, {"rows", rows}}, p, 1, rows, io, err, ple);
}

int decode_ple(void* p, int n, const int* slots, ssmp_layer_io* io, const ssmp_ple_io* ple, ssmp_error* err) {
  return with_outputs({{"call", "decode"}, {"slots", std::vector<int>(slots, slots + n)}}, p, n, 1, io, err, ple);
}

int verify_ple(void* p, int n, const int* slots, int k, int arm, ssmp_layer_io* io, const ssmp_ple_io* ple,
               ssmp_error* err) {
  return with_outputs({{"call", "verify"},
                       {"slots", std::vector<int>(slots, slots + n)},
                       {"k", k},
                       {"arm", arm == SSMP_ARM_WY ? "wy" : "exact"}},
                      p, n, k, io, err, ple);
}

int checkpoint(void* p, int slot, int async, ssmp_error* err) {
  return simple("checkpoint", p, {{"slot", slot}, {"async", async != 0}}, err);
}
int commit(void* p, int slot, int n, int k, ssmp_error* err) {
  return simple("commit", p, {{"slot", slot}, {"n", n}, {"k", k}}, err);
}
int rollback(void* p, int slot, int n, int and_checkpoint, ssmp_error* err) {
  return simple("rollback", p, {{"slot", slot}, {"n", n}, {"and_checkpoint", and_checkpoint != 0}}, err);
}
int to_f16(void* p, int slot, ssmp_error* err) { return simple("to_f16", p, {{"slot", slot}}, err); }
int snapshot_save(void* p, int slot, int snap, ssmp_error* err) {
  return simple("snapshot_save", p, {{"slot", slot}, {"snap", snap}}, err);
}
int snapshot_restore(void* p, int slot, int snap, ssmp_error* err) {
  return simple("snapshot_restore", p, {{"slot", slot}, {"snap", snap}}, err);
}

// Export: the reply says which fields it has; its blobs come in the order h, conv, [h_checkpoint],
// [conv_checkpoint], h intermediates, conv intermediates (per layer), then [the stage].
int export_state(void* p, int slot, ssmp_state* st, ssmp_error* err) {
  const Instance& I = self(p);
  json reply;
  std::vector<Blob> got;
  const int rc = exchange({{"call", "export_state"}, {"instance", I.id}, {"slot", slot}}, {}, err, &reply, &got);
  if (rc != SSMP_OK) return rc;
  try {
    if (st->n_layers != int(I.layers.size())) throw std::runtime_error("export of another model's layer count");
    const json& layers = reply.at("layers");
    if (!layers.is_array() || layers.size() != I.layers.size())
      throw std::runtime_error("export_state: 'layers' must list " + std::to_string(I.layers.size()) + " layers");
    size_t next = 0;
    auto take = [&](void* dst, size_t elems, bool f16, const std::string& what) {
      if (next >= got.size()) throw std::runtime_error("export_state: no array for " + what);
      const size_t bytes = elems * (f16 ? 2 : 4);
      if (got[next].size() != bytes)
        throw std::runtime_error("export_state: " + what + " has " + std::to_string(got[next].size()) +
                                 " bytes, expected " + std::to_string(bytes) + (f16 ? " (float16)" : " (float32)"));
      std::memcpy(dst, got[next].data(), bytes);
      ++next;
    };
    st->last_verify_k = reply.value("last_verify_k", 0);
    for (size_t l = 0; l < I.layers.size(); ++l) {
      const LayerSpec& L = I.layers[l];
      const json& j = layers[l];
      ssmp_layer_state& o = st->layers[l];
      const std::string at = "layer " + std::to_string(l) + " ";
      o.h_is_f16 = j.value("h_is_f16", false);
      o.has_h_checkpoint = j.value("has_h_checkpoint", false);
      o.h_checkpoint_is_f16 = j.value("h_checkpoint_is_f16", false);
      o.has_conv_checkpoint = j.value("has_conv_checkpoint", false);
      o.n_h_intermediates = j.value("n_h_intermediates", 0);
      o.n_conv_intermediates = j.value("n_conv_intermediates", 0);
      o.h_intermediates_are_f16 = j.value("h_intermediates_are_f16", false);
      if (o.n_h_intermediates < 0 || o.n_h_intermediates > o.h_intermediate_room || o.n_conv_intermediates < 0 ||
          o.n_conv_intermediates > o.conv_intermediate_room)
        throw std::runtime_error("export_state: " + at + "has " + std::to_string(o.n_h_intermediates) + " h and " +
                                 std::to_string(o.n_conv_intermediates) + " conv intermediates; room for " +
                                 std::to_string(o.h_intermediate_room) + " and " +
                                 std::to_string(o.conv_intermediate_room));
      const size_t conv =
          size_t(L.conv_dim()) * size_t(L.d_conv - ((g_table.flags & SSMP_CONV_WINDOW_D_CONV_MINUS_1) ? 1 : 0));
      const size_t h = size_t(L.h_elems());
      take(o.h, h, o.h_is_f16, at + "h");
      take(o.conv, conv, false, at + "conv");
      if (o.has_h_checkpoint) take(o.h_checkpoint, h, o.h_checkpoint_is_f16, at + "h_checkpoint");
      if (o.has_conv_checkpoint) take(o.conv_checkpoint, conv, false, at + "conv_checkpoint");
      for (int t = 0; t < o.n_h_intermediates; ++t)
        take(o.h_intermediates[t], h, o.h_intermediates_are_f16, at + "h_intermediate " + std::to_string(t));
      for (int t = 0; t < o.n_conv_intermediates; ++t)
        take(o.conv_intermediates[t], conv, false, at + "conv_intermediate " + std::to_string(t));
      if (!L.ple.hosted() || !st->ple) continue;  // a carry: live, checkpoint, snapshots, each history then conv
      const json& jp = j.at("ple");
      ssmp_ple_state& P = st->ple[l];
      P.has_live = jp.value("has_live", false);
      P.has_checkpoint = jp.value("has_checkpoint", false);
      P.n_snapshots = jp.value("n_snapshots", 0);
      if (P.n_snapshots < 0 || P.n_snapshots > P.snapshot_room)
        throw std::runtime_error("export_state: " + at + "has " + std::to_string(P.n_snapshots) +
                                 " PLE snapshots; room for " + std::to_string(P.snapshot_room));
      const size_t pc = size_t(L.ple.conv_rows()) * size_t(L.ple.channels);
      auto carry = [&](const ssmp_ple_carry& c, const std::string& what) {
        take(c.history, size_t(L.ple.history_len()), false, at + what + " history");
        take(c.conv, pc, false, at + what + " conv");
      };
      if (P.has_live) carry(P.live, "ple");
      if (P.has_checkpoint) carry(P.checkpoint, "ple_checkpoint");
      for (int t = 0; t < P.n_snapshots; ++t) carry(P.snapshots[t], "ple_snapshot " + std::to_string(t));
    }
    st->has_prefill_stage = reply.value("has_prefill_stage", false);
    if (st->has_prefill_stage) {
      if (!st->h_prefill_stage) throw std::runtime_error("export_state: a prefill stage outside f16-pool mode");
      take(st->h_prefill_stage, size_t(st->stage_elems), false, "h_prefill_stage");
    }
    if (next != got.size())
      throw std::runtime_error("export_state: " + std::to_string(got.size() - next) + " arrays more than its fields");
  } catch (const std::exception& e) {
    set_text(err->message, sizeof err->message, e.what());
    return SSMP_ERROR;
  }
  return SSMP_OK;
}

}  // namespace

const ssmp_plugin* python_plugin_table() {
  static const ssmp_plugin* table = [] {
    const char* fds = std::getenv("SSMCHECK_PYTHON_FDS");
    int r = -1, w = -1;
    if (!fds || std::sscanf(fds, "%d,%d", &r, &w) != 2 || r < 0 || w < 0)
      throw std::runtime_error(
          "python: backends are served by the Python bridge: run ssmcheck through ssmcheck.run(...) of "
          "python/ssmcheck (docs/plugins.md, \"Python\"); SSMCHECK_PYTHON_FDS is not set");
    g_conn = {r, w};
    ::signal(SIGPIPE, SIG_IGN);  // a dead peer is an error reply, never a silent death
    send({{"call", "hello"}, {"abi", SSMP_ABI_VERSION}}, {});
    std::vector<Blob> none;
    const json hello = receive(&none);
    if (hello.value("status", -1) != SSMP_OK)
      throw std::runtime_error("the Python side refused the handshake: " + hello.value("message", std::string()));
    g_name = hello.value("name", std::string("python"));
    // The string declarations of the class (bridge.py's declared()): key, the contract's value,
    // the other value, and the flag that other value sets.
    struct Choice {
      const char* key;
      const char* contract;
      const char* other;
      uint32_t flag;
    };
    static const Choice choices[] = {
        {"conv_window", "d_conv", "d_conv-1", SSMP_CONV_WINDOW_D_CONV_MINUS_1},
        {"h_layout", "nv,kd,vd", "nv,vd,kd", SSMP_H_VD_KD},
        {"gates", "clamped", "torch", SSMP_GATES_TORCH},
        {"f16_store", "saturate", "inf", SSMP_F16_STORE_INF},
        {"f16_rows", "stored", "carried", SSMP_F16_ROWS_CARRIED},
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
    g_table = ssmp_plugin{SSMP_ABI_VERSION, sizeof(ssmp_plugin), g_name.c_str(), flags,
                          create, destroy, create_pool, alloc, release, prefill, decode, verify, checkpoint, commit,
                          rollback, to_f16, snapshot_save, snapshot_restore, export_state, nullptr, nullptr,
                          prefill_ple, decode_ple, verify_ple};  // no async path
    return &g_table;
  }();
  return table;
}

}  // namespace ssm::plugin
