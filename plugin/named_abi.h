// The plug-in ABI by name (SSMP_BY_NAME, plugin/ssmcheck_plugin.h) on the side that drives a
// plug-in, written once for both places that call one: plugin/plugin_backend.cpp (in ssmcheck's
// process) and plugin/host_server.cpp (in the plug-in's host process). The layers by name
// (ssmp_config.layer_descs) from LayerSpec's attributes and weights (core/layer_attrs.h), an op's
// inputs and outputs by name (ssmp_rows_io) from LayerSpec::inputs(), and the state's fields by name
// (ssmp_field) from LayerSpec::state_fields(), whose answers are checked and read back into the
// ssmp_state that an old plug-in's export_state fills, so that everything after the call is shared.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/conventions.h"
#include "core/layer_attrs.h"
#include "core/layer_spec.h"
#include "core/model.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

// ssmp_config.layer_descs of a model: each layer's kind and attributes (core/layer_attrs.h) and its
// weights by name (LayerSpec::weights), pointing at the arrays weight_of gives (not copied: they
// must outlive it).
class LayerDescs {
 public:
  using WeightOf = std::function<const float*(size_t layer, const WeightField& w)>;
  LayerDescs(const std::vector<LayerSpec>& layers, const WeightOf& weight_of);
  LayerDescs(const LayerDescs&) = delete;
  LayerDescs& operator=(const LayerDescs&) = delete;
  const ssmp_layer_desc* get() const { return descs_.empty() ? nullptr : descs_.data(); }

 private:
  std::vector<std::vector<LayerAttr>> text_;
  std::vector<std::vector<ssmp_attr>> attrs_;
  std::vector<std::vector<ssmp_array>> weights_;
  std::vector<ssmp_layer_desc> descs_;
};

// The inputs and outputs of one op by name (ssmp_rows_io [entries][layers], entry-major), rebuilt
// for every call with their room kept.
class RowsIo {
 public:
  // The pointer to an input by where LayerRows keeps it (LayerSpec::inputs()' member).
  using InputOf = std::function<const float*(std::vector<float> LayerRows::*)>;
  void clear();
  // Appends one entry's layer: its inputs in LayerSpec::inputs() order, the output "out"
  // ([rows][out_dim]) and, on a layer hosting a PLE carry, "ple_out" ([rows][C]).
  void add(const LayerSpec& s, const InputOf& input_of, float* out, float* ple_out);
  ssmp_rows_io* data();  // valid until the next clear or add

 private:
  std::vector<ssmp_input> inputs_;
  std::vector<ssmp_output> outputs_;
  std::vector<ssmp_rows_io> io_;  // counts set by add, pointers by data
};

// The positional C layout's input of one entry's layer (ssmp_layer_io x, a, b, z and ssmp_ple_io's
// tokens, x) by where LayerRows keeps it, for a side that received them positionally.
RowsIo::InputOf positional_input(const ssmp_layer_io& io, const ssmp_ple_io& ple);

// The fields export_fields is asked for, pointing into the buffers of a prepared ssmp_state (as
// an old plug-in's export_state gets it), and its answers read back into that state.
class ExportFields {
 public:
  // Every field the state has room for: per layer its state_fields() (an indexed one once per t of
  // its room; the PLE fields only where `st` has a PLE carry), then h_prefill_stage when `st` has
  // a stage; dims in `layout` (the plug-in's conventions).
  void build(const std::vector<LayerSpec>& layers, const ssmp_state& st, const StateLayout& layout);
  int size() const { return int(fields_.size()); }
  ssmp_field* data() { return fields_.data(); }
  const ssmp_field& operator[](size_t i) const { return fields_[i]; }
  // The plug-in's answers into st's flags and counts, as its export_state would have set them.
  // Throws std::runtime_error "<who>: layer L field NAME[ t]: <what>" for an answer that breaks
  // the rules: h or conv not present, is_f16 on a field that is not h-like, intermediates or
  // snapshots with a gap or of mixed dtypes, a carry's history and conv present apart, a field whose
  // description (name, layer, index, dims, buffer) it changed.
  void apply(ssmp_state& st, int last_verify_k, const std::string& who) const;
  // The reverse, for a host that exported positionally and answers by name: each field's present
  // and is_f16 from st's flags and counts (what an export_fields of the same state would set).
  void mark(const ssmp_state& st);

 private:
  std::vector<ssmp_field> fields_;
  std::vector<ssmp_field> given_;  // as handed out
};

}  // namespace ssm::plugin
