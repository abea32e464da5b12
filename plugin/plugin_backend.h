// A plug-in (plugin/ssmcheck_plugin.h) as a Backend: loads the shared library, checks its ABI,
// and turns each Backend call into one C call, with errors crossing as codes and messages.
// Without SSMP_OWN_LEGALITY it refuses illegal ops itself through a Contract, like every backend
// of this repository, so the plug-in never sees one. Counterparts: cli/backend_registry.cpp
// (which makes `plugin:PATH.so[,key=value...]` a backend name), docs/plugins.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/capabilities.h"
#include "core/contract.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

// `PATH.so[,key=value...]`: the text after "plugin:" in --backend (or `SCHEME:NAME[,key=value...]`
// of a registered in-process table).
struct PluginSpec {
  std::string path;
  std::string options;  // "key=value,..." as given, passed to the plug-in's create
  bool in_process = false;  // plugin-in-process:PATH (debugging): dlopen'ed into ssmcheck's own process
  // Throws std::invalid_argument naming what is malformed (empty path, an option without '=').
  static PluginSpec parse(const std::string& text);
  std::string label() const;  // "plugin:NAME" (the file's stem) or the registered name, for suites and reports
};

// A loaded plug-in library (loaded once per path and kept for the process's life): served by its
// host process (plugin/hosted_plugin.h), or, for debugging or a registered table, in this one.
struct PluginLibrary {
  std::string path;  // absolute path of the file, or the registered name of an in-process table
  bool in_process = false;  // dlopen'ed here, or a registered table: its crash is ssmcheck's
  const ssmp_plugin* table = nullptr;
  bool own_legality() const { return table->flags & SSMP_OWN_LEGALITY; }
  bool bitwise() const { return table->flags & SSMP_BITWISE; }
  bool short_conv_window() const { return table->flags & SSMP_CONV_WINDOW_D_CONV_MINUS_1; }
  bool h_vd_kd() const { return table->flags & SSMP_H_VD_KD; }
  bool mamba2() const { return table->flags & SSMP_MAMBA2; }  // runs Mamba-2 layers too
  bool ple() const { return table->flags & SSMP_PLE; }        // runs PLE carries (prefill_ple, ...)
  bool no_prefill_stage() const { return table->flags & SSMP_NO_PREFILL_STAGE; }
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
  std::string declared() const;  // "name 'x', ABI 1, legality: its own, judged: bitwise"
};

// The table's ssmp_capabilities, when its header has the member and the plug-in set it; else null.
const ssmp_capabilities* declared_capabilities(const ssmp_plugin& t);

// Starts PATH's host process (ssmcheck-plugin-host), which loads and checks it: the file opens,
// exports ssmcheck_plugin, has this ABI version and a table large enough, every required member
// set; the table returned forwards every call to the host. Throws std::runtime_error naming the
// file and what is wrong (or how its host died while loading it). A name registered with
// register_plugin is returned as it is.
const PluginLibrary& load_plugin(const std::string& path);
// The same checks with the library loaded into this process (the host uses it; and
// `plugin-in-process:PATH`, for debugging a plug-in under gdb or a sanitizer).
const PluginLibrary& load_plugin_in_process(const std::string& path);

// An in-process table (cli/ssmcheck_lib.h: the Python bridge) under "SCHEME:NAME", checked like a
// file's; PluginSpec::parse("SCHEME:NAME,key=value") then names it. Throws std::runtime_error.
// hosted: the table forwards to a host process (plugin/hosted_plugin.h: a python: backend).
void register_plugin(const std::string& name, const ssmp_plugin* table, bool hosted = false);
bool is_registered(const std::string& name);

class PluginBackend : public Backend {
 public:
  // Loads the library and creates an instance with the spec's options (throws as load_plugin;
  // a failed create names the plug-in and its message).
  explicit PluginBackend(const PluginSpec& spec);
  ~PluginBackend() override;
  PluginBackend(const PluginBackend&) = delete;
  PluginBackend& operator=(const PluginBackend&) = delete;

  std::string name() const override { return label_; }
  void create_pool(const Model& model, const PoolConfig& pool) override;
  int alloc(int min_capacity) override;
  void release(int slot) override;
  StepOutputs prefill(int slot, const StepInputs& in) override;
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override;
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override;
  void checkpoint(int slot, bool async) override;
  void commit(int slot, int n, int k) override;
  void rollback(int slot, int n, bool and_checkpoint) override;
  void to_f16(int slot) override;
  void snapshot_save(int slot, int snap) override;
  void snapshot_restore(int slot, int snap) override;
  SequenceState export_state(int slot) override;
  bool async_pending(int slot) const override;
  bool pause_async_copies(bool on) override;

 private:
  // Runs one C call (err filled by it); SSMP_REFUSED becomes StateError of the named kind,
  // SSMP_ERROR and unknown codes std::runtime_error naming the plug-in and the call.
  template <class Call>
  void call(const char* op, int slot, const std::string& args, Call&& c) const;
  void require_pool(const char* op) const;
  // Refuses inputs whose sizes do not fit the model before any pointer reaches the plug-in
  // (also for SSMP_OWN_LEGALITY plug-ins: a wrong size would be an out-of-bounds read).
  void check_sizes(const char* op, int slot, const StepInputs& in, int rows) const;
  std::vector<StepOutputs> batch(OpKind op, const std::vector<int>& slots, int k, VerifyArm arm,
                                 const std::vector<StepInputs>& in);
  // The C layout of one sequence's inputs and room for its outputs (out.layers, out.ple sized
  // here), appended to io and ple.
  void add_io(const StepInputs& in, int rows, StepOutputs& out, std::vector<ssmp_layer_io>& io,
              std::vector<ssmp_ple_io>& ple) const;
  void check_slot_index(const char* op, int slot) const;

  const PluginLibrary* lib_;
  std::string label_;
  void* self_ = nullptr;
  bool has_pool_ = false;
  bool own_legality_ = false;
  Model model_;
  Contract contract_;  // used only without SSMP_OWN_LEGALITY
  // export buffers, allocated once per pool
  struct ExportRoom {
    std::vector<float> h, conv, h_checkpoint, conv_checkpoint;
    std::vector<std::vector<float>> h_inter, conv_inter;
    std::vector<void*> h_inter_ptrs;
    std::vector<float*> conv_inter_ptrs;
    // a layer hosting a PLE carry (SSMP_PLE): live, checkpoint, then the snapshots, each history
    // and conv in one buffer
    std::vector<std::vector<float>> ple;
    std::vector<ssmp_ple_carry> ple_snapshots;
  };
  std::vector<ExportRoom> room_;
  std::vector<float> stage_room_;
};

// The plug-in call running now ("plugin:x: commit(slot 1, n 2, k 4)"), or nullptr; read by the
// fatal-signal handler (cli/crash_verdict.cpp), so it is async-signal-safe: a static buffer.
const char* plugin_call_in_progress();

}  // namespace ssm::plugin
