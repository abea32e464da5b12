// A plug-in library loaded and checked (see plugin_library.h).
#include "plugin/plugin_library.h"

#include <dlfcn.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plugin/capabilities_wire.h"
#include "plugin/config_model.h"
#include "plugin/hosted_plugin.h"

namespace ssm::plugin {

namespace {

namespace fs = std::filesystem;

// The required members of the table, by name, for the load check; the *_ple members with
// SSMP_PLE, rows and export_fields instead of the positional op and export members with
// SSMP_BY_NAME (only then is the table known to reach them: check_table checks its size first).
std::vector<std::pair<const char*, bool>> required_members(const ssmp_plugin& t) {
  const bool by_name = (t.flags & SSMP_BY_NAME) != 0;
  std::vector<std::pair<const char*, bool>> m = {{"create", t.create != nullptr},
                                                 {"destroy", t.destroy != nullptr},
                                                 {"create_pool", t.create_pool != nullptr},
                                                 {"alloc", t.alloc != nullptr},
                                                 {"release", t.release != nullptr}};
  if (by_name) m.push_back({"rows (SSMP_BY_NAME)", t.rows != nullptr});
  else
    m.insert(m.end(),
             {{"prefill", t.prefill != nullptr}, {"decode", t.decode != nullptr}, {"verify", t.verify != nullptr}});
  m.insert(m.end(), {{"checkpoint", t.checkpoint != nullptr},
                     {"commit", t.commit != nullptr},
                     {"rollback", t.rollback != nullptr},
                     {"to_f16", t.to_f16 != nullptr},
                     {"snapshot_save", t.snapshot_save != nullptr},
                     {"snapshot_restore", t.snapshot_restore != nullptr}});
  if (by_name) m.push_back({"export_fields (SSMP_BY_NAME)", t.export_fields != nullptr});
  else m.push_back({"export_state", t.export_state != nullptr});
  if ((t.flags & SSMP_PLE) && !by_name)  // by name, a PLE carry's inputs and outputs come through rows
    m.insert(m.end(), {{"prefill_ple (SSMP_PLE)", t.prefill_ple != nullptr},
                       {"decode_ple (SSMP_PLE)", t.decode_ple != nullptr},
                       {"verify_ple (SSMP_PLE)", t.verify_ple != nullptr}});
  return m;
}

}  // namespace

PluginSpec PluginSpec::parse(const std::string& text) {
  PluginSpec s;
  const size_t comma = text.find(',');
  s.path = text.substr(0, comma);
  if (comma != std::string::npos) s.options = text.substr(comma + 1);
  if (s.path.empty()) throw std::invalid_argument("plugin: no path (expected plugin:PATH.so[,key=value...])");
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
         (no_prefill_stage() ? ", no prefill staging blob" : "") + (by_name() || hosted_by_name ? ", by name" : "") +
         ", runs: " + capabilities().text() +
         ", numerics: " + (numerics().is_contract() ? std::string("the contract's") : numerics().flags().substr(1));
}

bool offers_perturbed_schedule(const ssmp_plugin& t) {
  return covers(t.struct_size, offsetof(ssmp_plugin, perturb_schedule), sizeof t.perturb_schedule) &&
         t.perturb_schedule != nullptr;
}

bool PluginLibrary::perturbable() const { return offers_perturbed_schedule(*table); }

bool offers_field_digests(const ssmp_plugin& t) {
  return covers(t.struct_size, offsetof(ssmp_plugin, field_digests), sizeof t.field_digests) &&
         t.field_digests != nullptr;
}

const ssmp_capabilities* declared_capabilities(const ssmp_plugin& t) {
  return covers(t.struct_size, offsetof(ssmp_plugin, capabilities), sizeof t.capabilities) ? t.capabilities : nullptr;
}

namespace {
// The layer kinds a plug-in may run and the flag that declares each (0: every plug-in runs it); a
// kind core adds is one row here and one flag in plugin/ssmcheck_plugin.h.
struct KindFlag {
  LayerKind kind;
  uint32_t flag;
  const char* name;
};
constexpr KindFlag kKindFlags[] = {{LayerKind::gdn, 0, ""}, {LayerKind::mamba2, SSMP_MAMBA2, "SSMP_MAMBA2"}};
}  // namespace

bool PluginLibrary::runs(LayerKind kind) const {
  for (const KindFlag& k : kKindFlags)
    if (k.kind == kind) return (table->flags & k.flag) == k.flag;
  return false;
}

const char* PluginLibrary::kind_flag(LayerKind kind) {
  for (const KindFlag& k : kKindFlags)
    if (k.kind == kind) return k.name;
  return "(no flag)";
}

Capabilities PluginLibrary::capabilities() const {
  Capabilities c;
  c.kinds.clear();
  for (const KindFlag& k : kKindFlags)
    if (runs(k.kind)) c.kinds.push_back(k.kind);
  c.ple = ple();
  c.async_copies = table->pause_async_copies != nullptr;
  if (const ssmp_capabilities* d = declared_capabilities(*table)) c = with_declared(c, *d);
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
    throw std::runtime_error(where + ".h_modes has unknown bits " +
                             std::to_string(d->h_modes & ~uint32_t(SSMP_RUNS_ALL_H_MODES)) +
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
    throw std::runtime_error(who + ": its function table is " + std::to_string(t->struct_size) + " bytes, ABI " +
                             std::to_string(SSMP_ABI_VERSION) + "'s is at least " + std::to_string(kBeforePle) +
                             " (built against another header?)");
  const bool ple = t->flags & SSMP_PLE;
  if (ple && !covers(t->struct_size, offsetof(ssmp_plugin, verify_ple), sizeof t->verify_ple))
    throw std::runtime_error(who + ": declares SSMP_PLE, but its function table (" + std::to_string(t->struct_size) +
                             " bytes) ends before prefill_ple (a header from before SSMP_PLE?)");
  if (t->flags & SSMP_BY_NAME)
    for (const auto& [name, at, size] :
         {std::tuple{"rows", offsetof(ssmp_plugin, rows), sizeof t->rows},
          std::tuple{"export_fields", offsetof(ssmp_plugin, export_fields), sizeof t->export_fields}})
      if (!covers(t->struct_size, at, size))
        throw std::runtime_error(who + ": declares SSMP_BY_NAME, but its function table (" +
                                 std::to_string(t->struct_size) + " bytes) ends before " + name +
                                 " (a header from before SSMP_BY_NAME?)");
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
      {SSMP_BY_NAME, "SSMP_BY_NAME"},
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
  lib.hosted_by_name = hosted_plugin_by_name(t);
  return hosted().emplace(key, lib).first->second;
}

}  // namespace ssm::plugin
