// What an implementation runs, as one value: the layer kinds, PLE carries, h modes, the optional
// transitions, batches with padding rows, the async path and limits of shape. A plug-in declares it
// (plugin/ssmcheck_plugin.h, ssmp_capabilities), a Python class through attributes
// (docs/plugins.md, "Capabilities"); the built-ins run everything. It travels whole with the
// backend (fuzz/backend_entry.h) into campaigns (which draw only inside it, and require coverage
// only of what it runs), replay and the gate (which skip, with the reason from cannot_run, a trace
// or preset outside it).
#pragma once
#include <string>
#include <vector>

#include "core/layer_spec.h"
#include "core/model.h"
#include "core/op.h"

namespace ssm {

struct Capabilities {
  std::vector<LayerKind> kinds = {LayerKind::gdn, LayerKind::mamba2};
  bool ple = true;  // layers hosting a PLE carry (STATE-MODEL section 7)
  // Mamba-2 layers whose output norm has other groups than ng (LayerSpec::norm_groups: Hugging
  // Face's Mamba2 normalises the whole width). The reference runs them; the CUDA backend and the
  // plug-in ABI (which passes no norm groups) do not.
  bool norm_groups = true;
  // Layers whose numerics are not the contract's (LayerSpec::numerics: torch gates, FP16 stores to
  // inf, rows carried in FP32), as a trace of such an engine declares them. The reference runs them;
  // the CUDA kernels implement the contract's only.
  bool other_numerics = true;
  std::vector<HMode> h_modes = {HMode::f32, HMode::f16, HMode::f16_pool};  // to_f16 comes with f16
  // The transitions beyond the core ones (alloc, release, prefill, decode, verify, checkpoint,
  // commit, rollback, and to_f16 in f16 mode), which every implementation runs.
  bool checkpoint_async = true;                                            // checkpoint_async
  bool rollback_and_checkpoint_async = true;                               // rollback_and_checkpoint_async
  bool snapshots = true;                                                   // snapshot_save, snapshot_restore
  std::vector<VerifyArm> verify_arms = {VerifyArm::exact, VerifyArm::wy};  // at least one
  bool pad_rows = true;       // decode/verify batches with padding rows (kPadRow, on the dummy slot)
  bool async_copies = false;  // pause_async_copies holds its async copies (Backend::pause_async_copies)
  // Limits of shape; 0: none. Entries of one decode or verify (padding rows included), a verify's
  // K, slots of a pool.
  int max_batch = 0, max_verify_k = 0, max_slots = 0;

  // Everything ssmcheck's own implementations run (async_copies: the CUDA backend's).
  static Capabilities everything();

  bool runs(LayerKind k) const;
  bool runs(HMode m) const;
  bool runs(OpKind k) const;
  bool runs(VerifyArm a) const;
  // "" when it runs a model of `spec`'s layers (and, given, in h mode `mode`); else why not, naming
  // the first layer or the mode ("layer 1 is mamba2(...); NAME runs gdn layers only").
  std::string cannot_run(const ModelSpec& spec, const std::string& name) const;
  std::string cannot_run(const ModelSpec& spec, HMode mode, const std::string& name) const;
  // "" when it runs this op of a legal script (its transition, arm, padding rows, batch and K
  // within the limits); else why not.
  std::string cannot_run(const Op& op, const std::string& name) const;
  // "" when it runs a pool of `slots` slots; else why not.
  std::string cannot_run_slots(int slots, const std::string& name) const;
  // One line: "gdn, mamba2 layers; PLE carries; h modes f32, f16, f16-pool; all transitions; ..."
  std::string text() const;
  // Throws std::invalid_argument naming the member that is empty or out of range.
  void validate(const std::string& who) const;
};

}  // namespace ssm
