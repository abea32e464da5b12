// A plug-in library (plugin/ssmcheck_plugin.h) loaded and checked: its ABI version, table size,
// required members, flags and ssmp_capabilities, in its host process (plugin/hosted_plugin.h) or
// in this one, and what it declares. Counterparts: plugin/plugin_backend.h (drives a loaded one
// as a Backend), cli/backend_registry.cpp (makes `plugin:PATH.so[,key=value...]` a backend name).
#pragma once
#include <string>

#include "core/capabilities.h"
#include "core/layer_spec.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

// `PATH.so[,key=value...]`: the text after "plugin:" in --backend (or `SCHEME:NAME[,key=value...]`
// of a registered in-process table).
struct PluginSpec {
  std::string path;
  std::string options;      // "key=value,..." as given, passed to the plug-in's create
  bool in_process = false;  // plugin-in-process:PATH (debugging): dlopen'ed into ssmcheck's own process
  // Throws std::invalid_argument naming what is malformed (empty path, an option without '=').
  static PluginSpec parse(const std::string& text);
  std::string label() const;  // "plugin:NAME" (the file's stem) or the registered name, for suites and reports
};

// A loaded plug-in library (loaded once per path and kept for the process's life): served by its
// host process (plugin/hosted_plugin.h), or, for debugging or a registered table, in this one.
struct PluginLibrary {
  std::string path;         // absolute path of the file, or the registered name of an in-process table
  bool in_process = false;  // dlopen'ed here, or a registered table: its crash is ssmcheck's
  bool hosted_by_name = false;  // its host drives it by name (the forwarding table is positional)
  const ssmp_plugin* table = nullptr;
  bool own_legality() const { return table->flags & SSMP_OWN_LEGALITY; }
  bool bitwise() const { return table->flags & SSMP_BITWISE; }
  bool short_conv_window() const { return table->flags & SSMP_CONV_WINDOW_D_CONV_MINUS_1; }
  bool h_vd_kd() const { return table->flags & SSMP_H_VD_KD; }
  // Whether it runs layers of `kind` (GDN every plug-in; another kind with the flag kind_flag names).
  bool runs(LayerKind kind) const;
  static const char* kind_flag(LayerKind kind);               // "SSMP_MAMBA2"; "" for GDN
  bool ple() const { return table->flags & SSMP_PLE; }        // runs PLE carries (prefill_ple, ...)
  bool no_prefill_stage() const { return table->flags & SSMP_NO_PREFILL_STAGE; }
  bool by_name() const { return table->flags & SSMP_BY_NAME; }  // rows and export_fields (SSMP_BY_NAME)
  Numerics numerics() const {  // what SSMP_GATES_TORCH, SSMP_F16_STORE_INF and SSMP_F16_ROWS_CARRIED declare
    Numerics n;
    if (table->flags & SSMP_GATES_TORCH) n.gates = GateMath::torch;
    if (table->flags & SSMP_F16_STORE_INF) n.f16_store = F16Store::inf;
    if (table->flags & SSMP_F16_ROWS_CARRIED) n.f16_rows = F16Rows::carried;
    return n;
  }
  // What it runs: its layer kinds and PLE carry (flags), its ssmp_capabilities (everything when it
  // has none) and its async path (pause_async_copies set).
  Capabilities capabilities() const;
  // It offers a perturbed schedule: its header has perturb_schedule and the plug-in set it.
  bool perturbable() const;
  std::string declared() const;  // "name 'x', ABI 1, legality: its own, judged: bitwise, ..., by name"
};

// The table's ssmp_capabilities, when its header has the member and the plug-in set it; else null.
const ssmp_capabilities* declared_capabilities(const ssmp_plugin& t);
// Its header has perturb_schedule and the plug-in set it.
bool offers_perturbed_schedule(const ssmp_plugin& t);
// Its header has field_digests and the plug-in set it.
bool offers_field_digests(const ssmp_plugin& t);

// Starts PATH's host process (ssmcheck-plugin-host), which loads and checks it: the file opens,
// exports ssmcheck_plugin, has this ABI version and a table large enough, every required member
// set; the table returned forwards every call to the host. Throws std::runtime_error naming the
// file and what is wrong (or how its host died while loading it). A name registered with
// register_plugin is returned as it is.
const PluginLibrary& load_plugin(const std::string& path);
// The same checks with the library loaded into this process (the host uses it; and
// `plugin-in-process:PATH`, for debugging a plug-in under gdb or a sanitizer).
const PluginLibrary& load_plugin_in_process(const std::string& path);

// An in-process table (cli/backend_registry.cpp: a python: class's) under "SCHEME:NAME", checked like a
// file's; PluginSpec::parse("SCHEME:NAME,key=value") then names it. Throws std::runtime_error.
// hosted: the table forwards to a host process (plugin/hosted_plugin.h: a python: backend).
void register_plugin(const std::string& name, const ssmp_plugin* table, bool hosted = false);
bool is_registered(const std::string& name);

}  // namespace ssm::plugin
