// The plug-in ABI's C layouts (plugin/ssmcheck_plugin.h) from and to the contract's (core/state.h),
// on the side that drives a plug-in: the ssmp_config of a model and pool, one sequence's inputs
// and room for its outputs, and the exported state read back under the plug-in's conventions (a
// conv window of d_conv-1 columns, h transposed). Counterparts: plugin/plugin_backend.cpp (the
// calls), plugin/config_model.cpp (an ssmp_config back to a Model, on the plug-in's side).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/model.h"
#include "plugin/named_abi.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

// An ssmp_config describing `model` and `pool`, with the arrays it points into (the layers by name
// too: layer_descs); `model` must outlive it (its weights are pointed at, not copied).
class PluginConfig {
 public:
  PluginConfig(const Model& model, const PoolConfig& pool);
  PluginConfig(const PluginConfig&) = delete;
  PluginConfig& operator=(const PluginConfig&) = delete;
  const ssmp_config* get() const { return &config_; }

 private:
  std::vector<ssmp_layer> layers_;
  std::vector<ssmp_mamba2> mamba2_;
  std::vector<ssmp_ple> ple_;
  std::vector<int> h_capacity_;
  std::unique_ptr<LayerDescs> descs_;  // ssmp_config.layer_descs
  ssmp_config config_{};
};

// The C layout of one sequence's inputs and room for its outputs (out.layers, out.ple sized
// here), appended to io and ple. An input the kind lacks is NULL (a Mamba-2 layer's b), and so is
// every PLE pointer of a layer hosting no carry.
void add_io(const ModelSpec& spec, const StepInputs& in, int rows, StepOutputs& out, std::vector<ssmp_layer_io>& io,
            std::vector<ssmp_ple_io>& ple);

// How a plug-in lays out what it exports (its flags; docs/plugins.md, "Convention profiles").
struct ExportConventions {
  bool short_conv_window = false;  // SSMP_CONV_WINDOW_D_CONV_MINUS_1: conv as [conv_dim][d_conv-1]
  bool h_transposed = false;       // SSMP_H_VD_KD: h as [nv][vd][kd] (Mamba-2: [nh][ns][hp])
  bool no_prefill_stage = false;   // SSMP_NO_PREFILL_STAGE
  bool ple = false;                // SSMP_PLE: PLE carries are exported
};

// Room for one sequence's exported state, allocated once per pool: every field at FP32 size,
// intermediates up to the pool's largest capacity, PLE carries for the layers hosting one.
class ExportRoom {
 public:
  ExportRoom() = default;
  ExportRoom(const ModelSpec& spec, const PoolConfig& pool, ExportConventions conventions);
  ExportRoom(const ExportRoom&) = delete;
  ExportRoom& operator=(const ExportRoom&) = delete;
  ExportRoom(ExportRoom&&) = default;
  ExportRoom& operator=(ExportRoom&&) = default;

  // An ssmp_state pointing into the room, for the plug-in's export_state to fill; valid until
  // the next call.
  ssmp_state* prepare();
  // What the plug-in wrote into the prepared state, in the contract's layouts (core/state.h).
  // Throws std::runtime_error "<who> <what is wrong>" for counts outside the room or a prefill
  // stage it should not have written.
  SequenceState read(int slot, const std::string& who) const;
  // One field a plug-in filled by name (an ssmp_field of export_fields pointing into this room),
  // in the contract's layout: what read() makes of the same buffer.
  Tensor read_field(const ssmp_field& f) const;
  // The same into `to` when the field needs no conversion and `to` has its dtype and shape (storage
  // an update reuses: its first touch, page by page, costs more than the copy); else to = read_field.
  void read_field_into(const ssmp_field& f, Tensor& to) const;
  // The state an update starts from (Backend::export_update): last_verify_k, the conventions'
  // flags, one layer per model layer with h_is_f16 as given, no tensor field yet.
  SequenceState rest(int slot, int last_verify_k, const std::vector<bool>& h_is_f16) const;

 private:
  StateLayout layout() const;
  struct Layer {
    std::vector<float> h, conv, h_checkpoint, conv_checkpoint;
    std::vector<std::vector<float>> h_inter, conv_inter;
    std::vector<void*> h_inter_ptrs;
    std::vector<float*> conv_inter_ptrs;
    // a layer hosting a PLE carry: live, checkpoint, then the snapshots, each history and conv in
    // one buffer
    std::vector<std::vector<float>> ple;
    std::vector<ssmp_ple_carry> ple_snapshots;
  };
  ModelSpec spec_;
  ExportConventions conventions_;
  std::vector<Layer> layers_;
  std::vector<float> stage_;
  std::vector<ssmp_layer_state> states_;
  std::vector<ssmp_ple_state> ple_states_;
  ssmp_state state_{};
};

}  // namespace ssm::plugin
