// A plug-in (plugin/ssmcheck_plugin.h) as a Backend: loads the library (plugin/plugin_library.h)
// and turns each Backend call into one C call, with errors crossing as codes and messages and the
// data in the C layouts of plugin/plugin_layouts.h.
// Without SSMP_OWN_LEGALITY it refuses illegal ops itself through a Contract, like every backend
// of this repository, so the plug-in never sees one. Counterparts: cli/backend_registry.cpp
// (which makes `plugin:PATH.so[,key=value...]` a backend name), docs/plugins.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/capabilities.h"
#include "core/contract.h"
#include "plugin/plugin_layouts.h"
#include "plugin/named_abi.h"
#include "plugin/plugin_library.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

// When the lockstep asks a plug-in that offers field digests (ssmp_plugin.field_digests) for them
// instead of exporting every live state whole after every op: SSMCHECK_FIELD_DIGESTS in
// ssmcheck's environment, "auto" (the default: when the live state is at least
// kFieldDigestsMinBytes), "on" or "off". On a small state a changed sequence costs two calls
// (digests, then its fields) where a whole export costs one of a few KB (docs/plugins.md "Field
// digests", with the measurements behind the bound). Throws std::invalid_argument on another value.
enum class FieldDigestsUse { by_size, always, never };
FieldDigestsUse field_digests_use();
constexpr size_t kFieldDigestsMinBytes = size_t(64) << 10;
// h and conv of every layer, and the PLE carries, in FP32: what one sequence's live state holds.
size_t live_state_bytes(const ModelSpec& spec);
// Whether the lockstep asks a plug-in offering field digests for them on a model of `spec`.
bool asks_field_digests(FieldDigestsUse use, const ModelSpec& spec);

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
  // ssmp_plugin.field_digests, when the plug-in has it (else nullopt: the lockstep exports and
  // hashes): each present field's digest by the plug-in, mixed with its is_f16, then `rest` (the
  // plug-in's digest of last_verify_k and the dtypes).
  std::optional<FieldDigests> field_digests(int slot) override;
  // With field digests and export_fields: asks export_fields for the fields whose digest changed
  // only, and keeps the others from `state`; else a whole export.
  void export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) override;
  bool async_pending(int slot) const override;
  bool pause_async_copies(bool on) override;
  bool perturb_schedule(uint64_t seed) override;  // ssmp_plugin.perturb_schedule

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
  void check_slot_index(const char* op, int slot) const;
  // SSMP_BY_NAME: one entry's inputs and outputs (sized by add_io) appended to rows_io_.
  void add_named(const StepInputs& in, StepOutputs& out);

  const PluginLibrary* lib_;
  std::string label_;
  void* self_ = nullptr;
  bool has_pool_ = false;
  bool own_legality_ = false;
  Model model_;
  Contract contract_;  // used only without SSMP_OWN_LEGALITY
  ExportRoom export_room_;  // allocated once per pool
  bool by_name_ = false;    // SSMP_BY_NAME: ops through rows, the state through export_fields
  FieldDigestsUse digests_use_ = FieldDigestsUse::never;     // never when the plug-in offers none
  bool field_digests_ = false;                               // this pool's: digests_use_ and the state's size
  std::vector<std::optional<FieldKey>> field_keys_;          // fields_' keys, found once per pool
  const std::vector<std::optional<FieldKey>>& field_keys();  // after fields_.build
  RowsIo rows_io_;
  ExportFields fields_;
  std::vector<uint64_t> digests_;    // field_digests' answers, one per field and the rest
  std::vector<ssmp_field> changed_;  // export_update's fields to read
  StateLayout layout() const;        // the plug-in's conventions as the layouts its buffers are in
};

// The plug-in call running now ("plugin:x: commit(slot 1, n 2, k 4)"), or nullptr; read by the
// fatal-signal handler (cli/crash_verdict.cpp), so it is async-signal-safe: a static buffer.
const char* plugin_call_in_progress();

}  // namespace ssm::plugin
