// A plug-in as a Backend (see plugin_backend.h).
#include "plugin/plugin_backend.h"

#include <dlfcn.h>
#include <signal.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <utility>

#include "core/errors.h"
#include "core/state.h"
#include "plugin/config_model.h"
#include "plugin/hosted_plugin.h"

namespace ssm::plugin {

namespace {

namespace fs = std::filesystem;

// The running call, for the fatal-signal handler: written before each call, cleared after.
char g_call[512];
volatile sig_atomic_t g_in_call = 0;

class CallMarker {
 public:
  explicit CallMarker(const std::string& what) {
    std::snprintf(g_call, sizeof g_call, "%s", what.c_str());
    g_in_call = 1;
  }
  ~CallMarker() { g_in_call = 0; }
  CallMarker(const CallMarker&) = delete;
  CallMarker& operator=(const CallMarker&) = delete;
};

// A NUL-terminated copy of a fixed buffer the plug-in filled (it may have forgotten the NUL).
std::string text_of(const char* buf, size_t n) { return std::string(buf, strnlen(buf, n)); }

ssmp_h_mode h_mode_of(HMode m) {
  switch (m) {
    case HMode::f32: return SSMP_H_F32;
    case HMode::f16: return SSMP_H_F16;
    case HMode::f16_pool: return SSMP_H_F16_POOL;
  }
  return SSMP_H_F32;
}

// The required members of the table, by name, for the load check; the *_ple members with
// SSMP_PLE (only then is the table known to reach them: check_table checks its size first).
std::vector<std::pair<const char*, bool>> required_members(const ssmp_plugin& t) {
  std::vector<std::pair<const char*, bool>> m = {{"create", t.create != nullptr},
          {"destroy", t.destroy != nullptr},
          {"create_pool", t.create_pool != nullptr},
          {"alloc", t.alloc != nullptr},
          {"release", t.release != nullptr},
          {"prefill", t.prefill != nullptr},
          {"decode", t.decode != nullptr},
          {"verify", t.verify != nullptr},
          {"checkpoint", t.checkpoint != nullptr},
          {"commit", t.commit != nullptr},
          {"rollback", t.rollback != nullptr},
          {"to_f16", t.to_f16 != nullptr},
          {"snapshot_save", t.snapshot_save != nullptr},
          {"snapshot_restore", t.snapshot_restore != nullptr},
          {"export_state", t.export_state != nullptr}};
  if (t.flags & SSMP_PLE)
    m.insert(m.end(), {{"prefill_ple (SSMP_PLE)", t.prefill_ple != nullptr},
                       {"decode_ple (SSMP_PLE)", t.decode_ple != nullptr},
                       {"verify_ple (SSMP_PLE)", t.verify_ple != nullptr}});
  return m;
}

std::string slot_text(int slot) { return slot == SSMP_PAD_ROW ? "pad" : std::to_string(slot); }

}  // namespace

const char* plugin_call_in_progress() { return g_in_call ? g_call : nullptr; }

PluginSpec PluginSpec::parse(const std::string& text) {
  PluginSpec s;
  const size_t comma = text.find(',');
  s.path = text.substr(0, comma);
  if (comma != std::string::npos) s.options = text.substr(comma + 1);
  if (s.path.empty())
    throw std::invalid_argument("plugin: no path (expected plugin:PATH.so[,key=value...])");
  size_t start = 0;
  while (comma != std::string::npos && start <= s.options.size()) {
    const size_t end = std::min(s.options.find(',', start), s.options.size());
    const std::string kv = s.options.substr(start, end - start);
    if (kv.empty() || kv.find('=') == std::string::npos || kv.front() == '=')
      throw std::invalid_argument("plugin:" + text + ": option '" + kv + "' is not key=value");
    start = end + 1;
  }
  return s;
}

std::string PluginSpec::label() const {
  return is_registered(path) ? path : "plugin:" + fs::path(path).stem().string();
}

std::string PluginLibrary::declared() const {
  return std::string("name '") + (table->name ? table->name : "") + "', ABI " + std::to_string(table->abi_version) +
         ", legality: " + (own_legality() ? "its own (refusals compared)" : "ssmcheck's (sees legal ops only)") +
         ", judged: " + (bitwise() ? "bitwise" : "under the tolerance classes") +
         ", conv window: " + (short_conv_window() ? "d_conv-1 columns" : "d_conv columns") +
         ", h: " + (h_vd_kd() ? "[nv][vd][kd]" : "[nv][kd][vd]") +
         (no_prefill_stage() ? ", no prefill staging blob" : "") + ", runs: " + capabilities().text() +
         ", numerics: " + (numerics().is_contract() ? std::string("the contract's") : numerics().flags().substr(1));
}

const ssmp_capabilities* declared_capabilities(const ssmp_plugin& t) {
  return covers(t.struct_size, offsetof(ssmp_plugin, capabilities), sizeof t.capabilities) ? t.capabilities : nullptr;
}

Capabilities PluginLibrary::capabilities() const {
  Capabilities c;
  c.kinds = mamba2() ? std::vector<LayerKind>{LayerKind::gdn, LayerKind::mamba2} : std::vector<LayerKind>{LayerKind::gdn};
  c.ple = ple();
  c.async_copies = table->pause_async_copies != nullptr;
  if (const ssmp_capabilities* d = declared_capabilities(*table)) {
    c.h_modes.clear();
    for (HMode m : {HMode::f32, HMode::f16, HMode::f16_pool})
      if (d->h_modes & (1u << int(m))) c.h_modes.push_back(m);  // SSMP_RUNS_F32 == 1 << SSMP_H_F32, ...
    c.checkpoint_async = d->transitions & SSMP_T_CHECKPOINT_ASYNC;
    c.rollback_and_checkpoint_async = d->transitions & SSMP_T_ROLLBACK_AND_CHECKPOINT_ASYNC;
    c.snapshots = d->transitions & SSMP_T_SNAPSHOTS;
    c.verify_arms.clear();
    if (d->transitions & SSMP_T_VERIFY_EXACT) c.verify_arms.push_back(VerifyArm::exact);
    if (d->transitions & SSMP_T_VERIFY_WY) c.verify_arms.push_back(VerifyArm::wy);
    c.pad_rows = d->transitions & SSMP_T_PAD_ROWS;
    c.max_batch = d->max_batch;
    c.max_verify_k = d->max_verify_k;
    c.max_slots = d->max_slots;
  }
  return c;
}

namespace {

// Checks a table's ssmp_capabilities, when it has one; throws std::runtime_error naming `who`.
void check_capabilities(const std::string& who, const ssmp_plugin& t) {
  const ssmp_capabilities* d = declared_capabilities(t);
  if (!d) return;
  const std::string where = who + ": ssmp_capabilities";
  if (d->struct_size < sizeof(ssmp_capabilities))
    throw std::runtime_error(where + ".struct_size is " + std::to_string(d->struct_size) + ", expected " +
                             std::to_string(sizeof(ssmp_capabilities)) + " (set it to sizeof the struct)");
  if (d->h_modes & ~uint32_t(SSMP_RUNS_ALL_H_MODES))
    throw std::runtime_error(where + ".h_modes has unknown bits " + std::to_string(d->h_modes & ~uint32_t(SSMP_RUNS_ALL_H_MODES)) +
                             " (expected SSMP_RUNS_F32 | SSMP_RUNS_F16 | SSMP_RUNS_F16_POOL)");
  if (d->transitions & ~uint32_t(SSMP_T_ALL))
    throw std::runtime_error(where + ".transitions has unknown bits " +
                             std::to_string(d->transitions & ~uint32_t(SSMP_T_ALL)) + " (expected SSMP_T_...)");
  PluginLibrary lib;
  lib.table = &t;
  try {
    lib.capabilities().validate(where);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
}

// Checks a table the way every plug-in is checked; throws std::runtime_error naming `who`.
void check_table(const std::string& who, const ssmp_plugin* t) {
  if (!t) throw std::runtime_error(who + ": " SSMP_ENTRY_SYMBOL "() returned NULL");
  if (t->abi_version != SSMP_ABI_VERSION)
    throw std::runtime_error(who + ": built against plug-in ABI version " + std::to_string(t->abi_version) +
                             "; this ssmcheck speaks version " + std::to_string(SSMP_ABI_VERSION) +
                             " (rebuild it against this ssmcheck's plugin/ssmcheck_plugin.h)");
  // a header from before the *_ple members ends the table at async_pending: still ABI 1
  constexpr size_t kBeforePle = offsetof(ssmp_plugin, prefill_ple);
  if (t->struct_size < kBeforePle)
    throw std::runtime_error(who + ": its function table is " + std::to_string(t->struct_size) +
                             " bytes, ABI " + std::to_string(SSMP_ABI_VERSION) + "'s is at least " +
                             std::to_string(kBeforePle) + " (built against another header?)");
  const bool ple = t->flags & SSMP_PLE;
  if (ple && !covers(t->struct_size, offsetof(ssmp_plugin, verify_ple), sizeof t->verify_ple))
    throw std::runtime_error(who + ": declares SSMP_PLE, but its function table (" + std::to_string(t->struct_size) +
                             " bytes) ends before prefill_ple (a header from before SSMP_PLE?)");
  std::string missing;
  for (const auto& [name, set] : required_members(*t))
    if (!set) missing += (missing.empty() ? "" : ", ") + std::string(name);
  if (!missing.empty()) throw std::runtime_error(who + ": required members not set: " + missing);
  check_capabilities(who, *t);
  // the flags of this ABI (plugin/ssmcheck_plugin.h), for the mask and the message alike
  static const std::pair<uint32_t, const char*> flags[] = {
      {SSMP_OWN_LEGALITY, "SSMP_OWN_LEGALITY"},
      {SSMP_BITWISE, "SSMP_BITWISE"},
      {SSMP_CONV_WINDOW_D_CONV_MINUS_1, "SSMP_CONV_WINDOW_D_CONV_MINUS_1"},
      {SSMP_H_VD_KD, "SSMP_H_VD_KD"},
      {SSMP_NO_PREFILL_STAGE, "SSMP_NO_PREFILL_STAGE"},
      {SSMP_GATES_TORCH, "SSMP_GATES_TORCH"},
      {SSMP_F16_STORE_INF, "SSMP_F16_STORE_INF"},
      {SSMP_F16_ROWS_CARRIED, "SSMP_F16_ROWS_CARRIED"},
      {SSMP_MAMBA2, "SSMP_MAMBA2"},
      {SSMP_PLE, "SSMP_PLE"},
  };
  uint32_t known = 0;
  std::string names;
  for (const auto& [bit, name] : flags) {
    known |= bit;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  if (t->flags & ~known)
    throw std::runtime_error(who + ": unknown flags " + std::to_string(t->flags & ~known) + " (ABI " +
                             std::to_string(SSMP_ABI_VERSION) + " knows " + names + ")");
}

// Loaded files by absolute path, and in-process tables by their registered name.
std::map<std::string, PluginLibrary>& loaded() {
  static std::map<std::string, PluginLibrary> m;
  return m;
}
std::map<std::string, PluginLibrary>& registered() {
  static std::map<std::string, PluginLibrary> m;
  return m;
}

}  // namespace

void register_plugin(const std::string& name, const ssmp_plugin* table, bool hosted) {
  const size_t colon = name.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == name.size() || name.rfind("plugin:", 0) == 0 ||
      name.find(',') != std::string::npos)
    throw std::runtime_error("in-process plug-in name '" + name +
                             "' must be SCHEME:NAME with a scheme other than 'plugin' and no ',' (e.g. python:mine)");
  check_table("in-process plug-in " + name, table);
  PluginLibrary lib;
  lib.path = name;
  lib.table = table;
  lib.in_process = !hosted;
  registered()[name] = lib;
}

bool is_registered(const std::string& name) { return registered().count(name) > 0; }

namespace {
std::map<std::string, PluginLibrary>& hosted() {
  static std::map<std::string, PluginLibrary> m;
  return m;
}

// The absolute path of a plug-in file, checked to be one; throws naming `who`.
std::string plugin_file(const std::string& path, const std::string& who) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  const std::string key = ec ? path : abs.lexically_normal().string();
  if (!fs::exists(key, ec)) throw std::runtime_error(who + ": no such file");
  if (!fs::is_regular_file(key, ec)) throw std::runtime_error(who + ": not a file");
  return key;
}
}  // namespace

const PluginLibrary& load_plugin_in_process(const std::string& path) {
  if (auto it = registered().find(path); it != registered().end()) return it->second;
  const std::string who = "plug-in " + path;
  const std::string key = plugin_file(path, who);
  if (auto it = loaded().find(key); it != loaded().end()) return it->second;
  dlerror();
  void* handle = dlopen(key.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    throw std::runtime_error(who + ": cannot be loaded: " + (e ? e : "dlopen failed"));
  }
  // A library that fails a check stays loaded (dlclose of a half-initialised library is riskier
  // than the few pages it holds); it is never used.
  auto entry = reinterpret_cast<ssmp_entry_fn>(dlsym(handle, SSMP_ENTRY_SYMBOL));
  if (!entry)
    throw std::runtime_error(who + ": does not export " SSMP_ENTRY_SYMBOL
                             "() (the entry point of plugin/ssmcheck_plugin.h; declared extern \"C\"?)");
  const ssmp_plugin* t = entry();
  check_table(who, t);
  PluginLibrary lib;
  lib.path = key;
  lib.table = t;
  lib.in_process = true;
  return loaded().emplace(key, lib).first->second;
}

const PluginLibrary& load_plugin(const std::string& path) {
  if (auto it = registered().find(path); it != registered().end()) return it->second;
  const std::string who = "plug-in " + path;
  const std::string key = plugin_file(path, who);
  if (auto it = hosted().find(key); it != hosted().end()) return it->second;
  // the host loads and checks the library (a crash or an exit while loading is its death, named)
  const ssmp_plugin* t = hosted_plugin_table(c_plugin_launch(key, "plugin:" + fs::path(key).stem().string()));
  check_table(who, t);
  PluginLibrary lib;
  lib.path = key;
  lib.table = t;
  return hosted().emplace(key, lib).first->second;
}

PluginBackend::PluginBackend(const PluginSpec& spec)
    : lib_(spec.in_process ? &load_plugin_in_process(spec.path) : &load_plugin(spec.path)), label_(spec.label()) {
  own_legality_ = lib_->own_legality();
  ssmp_error err{};
  {
    CallMarker m(label_ + ": create(\"" + spec.options + "\")");
    self_ = lib_->table->create(spec.options.c_str(), &err);
  }
  if (!self_)
    throw std::runtime_error(label_ + ": create failed: " + text_of(err.message, sizeof err.message) +
                             (spec.options.empty() ? "" : " (options: " + spec.options + ")"));
}

PluginBackend::~PluginBackend() {
  if (!self_) return;
  CallMarker m(label_ + ": destroy");
  lib_->table->destroy(self_);
}

template <class Call>
void PluginBackend::call(const char* op, int slot, const std::string& args, Call&& c) const {
  ssmp_error err{};
  int rc;
  {
    CallMarker m(label_ + ": " + op + "(" + args + ")");
    rc = c(&err);
  }
  if (rc == SSMP_OK) return;
  const std::string message = text_of(err.message, sizeof err.message);
  if (rc == SSMP_REFUSED) {
    const std::string kind = text_of(err.kind, sizeof err.kind);
    const auto k = parse_error_kind(kind);
    if (!k)
      throw std::runtime_error(label_ + ": " + op + "(" + args + ") refused with unknown error kind '" + kind +
                               "' (known: " + known_error_kinds() + "): " + message);
    throw StateError(*k, op, slot, -1, label_ + ": " + message);
  }
  if (rc == SSMP_ERROR) throw std::runtime_error(label_ + ": " + op + "(" + args + ") failed: " + message);
  throw std::runtime_error(label_ + ": " + op + "(" + args + ") returned " + std::to_string(rc) +
                           ", not an ssmp_status (0 ok, 1 refused, 2 error)");
}

void PluginBackend::require_pool(const char* op) const {
  if (!has_pool_) throw std::logic_error(label_ + ": " + op + " before create_pool");
}

void PluginBackend::check_slot_index(const char* op, int slot) const {
  if (slot < 0 || slot >= contract_.pool().max_slots)
    throw std::runtime_error(label_ + ": " + op + " returned slot " + std::to_string(slot) + ", outside 0.." +
                             std::to_string(contract_.pool().max_slots - 1));
}

void PluginBackend::check_sizes(const char* op, int slot, const StepInputs& in, int rows) const {
  const ModelSpec& spec = model_.spec;
  auto refuse = [&](const std::string& what) { throw StateError(ErrorKind::bad_input, op, slot, -1, what); };
  if (in.rows != rows) refuse("inputs of " + std::to_string(in.rows) + " rows, expected " + std::to_string(rows));
  if (in.layers.size() != spec.layers.size())
    refuse("inputs of " + std::to_string(in.layers.size()) + " layers, the model has " +
           std::to_string(spec.layers.size()));
  for (size_t l = 0; l < spec.layers.size(); ++l)
    for (const InputField& f : spec.layers[l].inputs())  // the kind's inputs (core/layer_geometry.cpp)
      if ((in.layers[l].*f.member).size() != size_t(rows) * size_t(f.width))
        refuse("layer " + std::to_string(l) + ": input " + f.name + " holds " +
               std::to_string((in.layers[l].*f.member).size()) + " values, expected [" + std::to_string(rows) +
               "][" + std::to_string(f.width) + "]");
}

void PluginBackend::add_io(const StepInputs& in, int rows, StepOutputs& out, std::vector<ssmp_layer_io>& io,
                           std::vector<ssmp_ple_io>& ple) const {
  // an input the kind lacks is NULL (a Mamba-2 layer's b), and so is every PLE pointer of a layer
  // hosting no carry
  auto p = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  out.rows = rows;
  const bool with_ple = model_.spec.hosts_ple();  // out.ple has an entry per layer, or none
  for (size_t l = 0; l < in.layers.size(); ++l) {
    const LayerSpec& s = model_.spec.layers[l];
    const LayerRows& r = in.layers[l];
    out.layers.emplace_back(size_t(rows) * size_t(s.out_dim()), 0.0f);
    if (with_ple) out.ple.emplace_back(size_t(rows) * size_t(s.ple.channels), 0.0f);
    io.push_back({p(r.x), p(r.a), p(r.b), p(r.z), out.layers.back().data()});
    ple.push_back(s.ple.hosted() ? ssmp_ple_io{r.ple_tokens.data(), r.ple_x.data(), out.ple.back().data()}
                                 : ssmp_ple_io{nullptr, nullptr, nullptr});
  }
}

void PluginBackend::create_pool(const Model& model, const PoolConfig& pool) {
  model.validate();
  pool.validate();
  std::vector<ssmp_layer> layers;
  std::vector<ssmp_mamba2> mamba2(model.spec.layers.size(), ssmp_mamba2{});
  std::vector<ssmp_ple> ple(model.spec.layers.size(), ssmp_ple{});
  bool any_mamba2 = false;
  for (size_t l = 0; l < model.spec.layers.size(); ++l) {
    const LayerSpec& s = model.spec.layers[l];
    const LayerWeights& w = model.weights[l];
    const bool m2 = s.kind == LayerKind::mamba2;
    if (s.ple.hosted() && !lib_->ple())
      throw std::invalid_argument(label_ + ": layer " + std::to_string(l) + " is " + s.name() +
                                  "; it hosts a PLE carry, which the plug-in does not run (it does not declare SSMP_PLE)");
    if (s.ple.hosted())
      ple[l] = {s.ple.channels, s.ple.ngram_size, s.ple.k_size, s.ple.dilation, s.ple.eos_id, w.ple_w.data()};
    if (m2 && !lib_->mamba2())
      throw std::invalid_argument(label_ + ": layer " + std::to_string(l) + " is " + s.name() +
                                  "; the plug-in runs GDN layers only (it does not declare SSMP_MAMBA2)");
    ssmp_layer L{SSMP_LAYER_GDN, s.nk, s.nv, s.kd, s.vd, s.d_conv, s.output_gate == OutputGate::sigmoid ? 1 : 0,
                 s.eps, w.conv_w.data(), w.conv_bias.empty() ? nullptr : w.conv_bias.data(), w.A_log.data(),
                 w.dt_bias.data(), w.norm_w.data()};
    if (m2) {  // GDN's shape fields are 0; the shape travels in ssmp_config.mamba2
      L.kind = SSMP_LAYER_MAMBA2;
      L.nk = L.nv = L.kd = L.vd = L.sigmoid_gate = 0;
      mamba2[l] = {s.nh, s.hp, s.ns, s.ng, s.norm_before_gate ? 1 : 0, s.dt_min, s.dt_max, w.D.data()};
      any_mamba2 = true;
    }
    layers.push_back(L);
  }
  std::vector<int> h_capacity;
  for (int s = 0; s < pool.max_slots; ++s) h_capacity.push_back(pool.capacity(s));
  ssmp_config c{};
  c.struct_size = sizeof c;
  c.model_name = model.spec.name.c_str();
  c.n_layers = int(layers.size());
  c.layers = layers.data();
  c.h_mode = h_mode_of(pool.h_mode);
  c.max_slots = pool.max_slots;
  c.h_capacity = h_capacity.data();
  c.conv_capacity = pool.conv_capacity;
  c.snapshot_slots = pool.snapshot_slots;
  c.mamba2 = any_mamba2 ? mamba2.data() : nullptr;
  c.ple = model.spec.hosts_ple() ? ple.data() : nullptr;
  has_pool_ = false;
  call("create_pool", -1, pool.name(), [&](ssmp_error* e) { return lib_->table->create_pool(self_, &c, e); });
  model_ = model;
  contract_ = Contract(model.spec, pool);
  // export room: every field at FP32 size, intermediates up to the largest capacity
  room_.assign(model.spec.layers.size(), ExportRoom{});
  const int h_room = pool.max_capacity(), conv_room = pool.conv_capacity;
  for (size_t l = 0; l < room_.size(); ++l) {
    const LayerSpec& s = model.spec.layers[l];
    ExportRoom& r = room_[l];
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
  stage_room_.assign(pool.h_mode == HMode::f16_pool ? size_t(stage_elems(model.spec)) : 0, 0.0f);
  has_pool_ = true;
}

int PluginBackend::alloc(int min_capacity) {
  require_pool("alloc");
  if (!own_legality_) contract_.check_alloc(min_capacity);
  int slot = -1;
  call("alloc", -1, "min capacity " + std::to_string(min_capacity),
       [&](ssmp_error* e) { return lib_->table->alloc(self_, min_capacity, &slot, e); });
  check_slot_index("alloc", slot);
  if (contract_.slot(slot).claimed)
    throw std::runtime_error(label_ + ": alloc returned slot " + std::to_string(slot) + ", which is claimed");
  contract_.on_alloc(slot);
  return slot;
}

void PluginBackend::release(int slot) {
  require_pool("release");
  if (!own_legality_) contract_.check_claimed("release", slot);
  call("release", slot, "slot " + std::to_string(slot), [&](ssmp_error* e) { return lib_->table->release(self_, slot, e); });
  if (slot >= 0 && slot < contract_.pool().max_slots) contract_.on_release(slot);
}

StepOutputs PluginBackend::prefill(int slot, const StepInputs& in) {
  require_pool("prefill");
  if (!own_legality_) contract_.check_prefill(slot, in);
  check_sizes("prefill", slot, in, in.rows);
  if (in.rows < 1) throw StateError(ErrorKind::bad_argument, "prefill", slot, -1, "T must be >= 1");
  StepOutputs out;
  std::vector<ssmp_layer_io> io;
  std::vector<ssmp_ple_io> ple;
  add_io(in, in.rows, out, io, ple);
  call("prefill", slot, "slot " + std::to_string(slot) + ", " + std::to_string(in.rows) + " rows", [&](ssmp_error* e) {
    return model_.spec.hosts_ple() ? lib_->table->prefill_ple(self_, slot, in.rows, io.data(), ple.data(), e)
                                   : lib_->table->prefill(self_, slot, in.rows, io.data(), e);
  });
  if (!own_legality_) contract_.on_prefill(slot);
  return out;
}

std::vector<StepOutputs> PluginBackend::batch(OpKind op, const std::vector<int>& slots, int k, VerifyArm arm,
                                              const std::vector<StepInputs>& in) {
  const char* name = op_name(op);
  require_pool(name);
  const int rows = op == OpKind::decode ? 1 : k;
  if (!own_legality_) contract_.check_batch(op, slots, rows, in);
  if (in.size() != slots.size())
    throw StateError(ErrorKind::bad_input, name, -1, -1,
                     std::to_string(in.size()) + " inputs for " + std::to_string(slots.size()) + " rows");
  if (op == OpKind::verify && k < 1) throw StateError(ErrorKind::bad_argument, name, -1, -1, "K must be >= 1");
  std::vector<StepOutputs> out(slots.size());
  std::vector<ssmp_layer_io> io;
  std::vector<ssmp_ple_io> ple;
  std::string args;
  for (size_t i = 0; i < slots.size(); ++i) {
    check_sizes(name, slots[i], in[i], rows);
    add_io(in[i], rows, out[i], io, ple);
    args += (i ? "," : "slots ") + slot_text(slots[i]);
  }
  // the f16-mode conversion of FP32 h on its first decode step, decided before the op
  std::vector<int> converts;
  if (!own_legality_)
    for (int s : slots)
      if (s != kPadRow && contract_.needs_to_f16(s)) converts.push_back(s);
  const int n = int(slots.size());
  const bool with_ple = model_.spec.hosts_ple();
  const int c_arm = arm == VerifyArm::wy ? SSMP_ARM_WY : SSMP_ARM_EXACT;
  const ssmp_plugin& t = *lib_->table;
  if (op == OpKind::decode)
    call(name, -1, args, [&](ssmp_error* e) {
      return with_ple ? t.decode_ple(self_, n, slots.data(), io.data(), ple.data(), e)
                      : t.decode(self_, n, slots.data(), io.data(), e);
    });
  else
    call(name, -1, args + ", k " + std::to_string(k), [&](ssmp_error* e) {
      return with_ple ? t.verify_ple(self_, n, slots.data(), k, c_arm, io.data(), ple.data(), e)
                      : t.verify(self_, n, slots.data(), k, c_arm, io.data(), e);
    });
  if (!own_legality_) {
    for (int s : converts) contract_.on_to_f16(s);
    if (op == OpKind::verify)
      for (int s : slots)
        if (s != kPadRow) contract_.on_verify(s, k);
  }
  return out;
}

std::vector<StepOutputs> PluginBackend::decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) {
  return batch(OpKind::decode, slots, 1, VerifyArm::exact, in);
}

std::vector<StepOutputs> PluginBackend::verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                               const std::vector<StepInputs>& in) {
  return batch(OpKind::verify, slots, k, arm, in);
}

void PluginBackend::checkpoint(int slot, bool async) {
  const char* op = async ? "checkpoint_async" : "checkpoint";
  require_pool(op);
  if (!own_legality_) contract_.check_claimed(op, slot);
  call(op, slot, "slot " + std::to_string(slot),
       [&](ssmp_error* e) { return lib_->table->checkpoint(self_, slot, async ? 1 : 0, e); });
  if (!own_legality_) contract_.on_checkpoint(slot);
}

void PluginBackend::commit(int slot, int n, int k) {
  require_pool("commit");
  if (!own_legality_) contract_.check_commit(slot, n, k);
  call("commit", slot, "slot " + std::to_string(slot) + ", n " + std::to_string(n) + ", k " + std::to_string(k),
       [&](ssmp_error* e) { return lib_->table->commit(self_, slot, n, k, e); });
}

void PluginBackend::rollback(int slot, int n, bool and_checkpoint) {
  const OpKind op = and_checkpoint ? OpKind::rollback_and_checkpoint_async : OpKind::rollback;
  require_pool(op_name(op));
  if (!own_legality_) contract_.check_rollback(op, slot, n);
  call(op_name(op), slot, "slot " + std::to_string(slot) + ", n " + std::to_string(n),
       [&](ssmp_error* e) { return lib_->table->rollback(self_, slot, n, and_checkpoint ? 1 : 0, e); });
  if (!own_legality_ && and_checkpoint) contract_.on_checkpoint(slot);
}

void PluginBackend::to_f16(int slot) {
  require_pool("to_f16");
  if (!own_legality_) contract_.check_to_f16(slot);
  call("to_f16", slot, "slot " + std::to_string(slot), [&](ssmp_error* e) { return lib_->table->to_f16(self_, slot, e); });
  if (!own_legality_) contract_.on_to_f16(slot);
}

void PluginBackend::snapshot_save(int slot, int snap) {
  require_pool("snapshot_save");
  if (!own_legality_) contract_.check_snapshot(OpKind::snapshot_save, slot, snap);
  call("snapshot_save", slot, "slot " + std::to_string(slot) + ", snapshot " + std::to_string(snap),
       [&](ssmp_error* e) { return lib_->table->snapshot_save(self_, slot, snap, e); });
  if (!own_legality_) contract_.on_snapshot_save(slot, snap);
}

void PluginBackend::snapshot_restore(int slot, int snap) {
  require_pool("snapshot_restore");
  if (!own_legality_) contract_.check_snapshot(OpKind::snapshot_restore, slot, snap);
  call("snapshot_restore", slot, "slot " + std::to_string(slot) + ", snapshot " + std::to_string(snap),
       [&](ssmp_error* e) { return lib_->table->snapshot_restore(self_, slot, snap, e); });
}

SequenceState PluginBackend::export_state(int slot) {
  require_pool("export");
  if (!own_legality_) contract_.check_claimed("export", slot);
  const ModelSpec& spec = model_.spec;
  std::vector<ssmp_layer_state> ls(spec.layers.size());
  for (size_t l = 0; l < ls.size(); ++l) {
    ExportRoom& r = room_[l];
    ssmp_layer_state& s = ls[l];
    s = ssmp_layer_state{};
    s.h = r.h.data();
    s.conv = r.conv.data();
    s.h_checkpoint = r.h_checkpoint.data();
    s.conv_checkpoint = r.conv_checkpoint.data();
    s.h_intermediates = r.h_inter_ptrs.data();
    s.conv_intermediates = r.conv_inter_ptrs.data();
    s.h_intermediate_room = int(r.h_inter.size());
    s.conv_intermediate_room = int(r.conv_inter.size());
  }
  std::vector<ssmp_ple_state> ple(spec.hosts_ple() && lib_->ple() ? ls.size() : 0, ssmp_ple_state{});
  for (size_t l = 0; l < ple.size(); ++l) {
    ExportRoom& r = room_[l];
    if (r.ple.empty()) continue;
    const size_t hist = size_t(spec.layers[l].ple.history_len());
    ple[l].live = {r.ple[0].data(), r.ple[0].data() + hist};
    ple[l].checkpoint = {r.ple[1].data(), r.ple[1].data() + hist};
    ple[l].snapshots = r.ple_snapshots.data();
    ple[l].snapshot_room = int(r.ple_snapshots.size());
  }
  ssmp_state st{};
  st.struct_size = sizeof st;
  st.n_layers = int(ls.size());
  st.layers = ls.data();
  st.ple = ple.empty() ? nullptr : ple.data();
  st.h_prefill_stage = stage_room_.empty() ? nullptr : stage_room_.data();
  st.stage_elems = int64_t(stage_room_.size());
  call("export_state", slot, "slot " + std::to_string(slot),
       [&](ssmp_error* e) { return lib_->table->export_state(self_, slot, &st, e); });
  auto bad = [&](const std::string& what) {
    throw std::runtime_error(label_ + ": export_state(slot " + std::to_string(slot) + ") " + what);
  };
  if (st.last_verify_k < 0 || st.last_verify_k > kMaxIntermediates)
    bad("says last_verify_k = " + std::to_string(st.last_verify_k));
  if (st.has_prefill_stage && stage_room_.empty()) bad("wrote a prefill stage outside f16-pool mode");
  if (st.has_prefill_stage && lib_->no_prefill_stage()) bad("wrote a prefill stage but declares SSMP_NO_PREFILL_STAGE");
  SequenceState out;
  out.slot = slot;
  out.prefill_stage_absent = lib_->no_prefill_stage();
  out.last_verify_k = st.last_verify_k;
  auto tensor = [](const void* p, bool f16, std::vector<int64_t> shape) {
    Tensor t = Tensor::zeros(f16 ? DType::f16 : DType::f32, std::move(shape));
    std::memcpy(t.raw(), p, t.bytes());
    return t;
  };
  // the plug-in's conventions (docs/plugins.md, "Convention profiles") to the contract's layouts
  const bool short_window = lib_->short_conv_window(), transposed = lib_->h_vd_kd();
  auto h_field = [&](const void* p, bool f16, const LayerSpec& sp) {
    if (!transposed) return tensor(p, f16, h_shape(sp));
    Tensor t = Tensor::zeros(f16 ? DType::f16 : DType::f32, h_shape(sp));
    const size_t e = dtype_size(t.dtype());
    const char* src = static_cast<const char*>(p);
    char* dst = static_cast<char*>(t.raw());
    const std::vector<int64_t> d = h_shape(sp);  // [A][B][C] from the plug-in's [A][C][B]
    for (int64_t h = 0; h < d[0]; ++h)            // (GDN [nv][vd][kd], Mamba-2 [nh][ns][hp])
      for (int64_t i = 0; i < d[1]; ++i)
        for (int64_t j = 0; j < d[2]; ++j)
          std::memcpy(dst + size_t((h * d[1] + i) * d[2] + j) * e, src + size_t((h * d[2] + j) * d[1] + i) * e, e);
    return t;
  };
  auto conv_field = [&](const float* p, const LayerSpec& sp) {
    if (!short_window) return tensor(p, false, conv_shape(sp));
    Tensor t = Tensor::zeros(DType::f32, conv_shape(sp));  // column 0: not kept, not compared
    const int D = sp.d_conv;
    for (int c = 0; c < sp.conv_dim(); ++c)
      std::memcpy(t.f32() + size_t(c) * D + 1, p + size_t(c) * (D - 1), size_t(D - 1) * sizeof(float));
    return t;
  };
  for (size_t l = 0; l < ls.size(); ++l) {
    const ssmp_layer_state& s = ls[l];
    const LayerSpec& sp = spec.layers[l];
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
    for (int t = 0; t < s.n_conv_intermediates; ++t) L.conv_intermediates.push_back(conv_field(s.conv_intermediates[t], sp));
    if (!ple.empty() && sp.ple.hosted()) {
      const ssmp_ple_state& P = ple[l];
      if (P.n_snapshots < 0 || P.n_snapshots > P.snapshot_room)
        bad("layer " + std::to_string(l) + " says it kept " + std::to_string(P.n_snapshots) +
            " PLE snapshots; room: " + std::to_string(P.snapshot_room));
      auto carry = [&](const ssmp_ple_carry& c) {
        return PleCarry{tensor(c.history, false, ple_history_shape(sp)), tensor(c.conv, false, ple_conv_shape(sp))};
      };
      if (P.has_live) L.ple = carry(P.live);
      if (P.has_checkpoint) L.ple_checkpoint = carry(P.checkpoint);
      for (int t = 0; t < P.n_snapshots; ++t) L.ple_snapshots.push_back(carry(room_[l].ple_snapshots[size_t(t)]));
    }
    out.layers.push_back(std::move(L));
  }
  if (st.has_prefill_stage) out.h_prefill_stage = tensor(stage_room_.data(), false, {int64_t(stage_room_.size())});
  return out;
}

bool PluginBackend::async_pending(int slot) const {
  if (!self_ || !lib_->table->async_pending) return false;
  CallMarker m(label_ + ": async_pending(slot " + std::to_string(slot) + ")");
  return lib_->table->async_pending(self_, slot) != 0;
}

bool PluginBackend::pause_async_copies(bool on) {
  if (!self_ || !lib_->table->pause_async_copies) return false;
  CallMarker m(label_ + ": pause_async_copies(" + std::to_string(on) + ")");
  return lib_->table->pause_async_copies(self_, on ? 1 : 0) != 0;
}

}  // namespace ssm::plugin
