// An engine's per-layer conventions, by the names traces, the capture ABI and Python classes spell
// them (docs/trace-format.md "Conventions", docs/plugins.md "Convention profiles"): the numerics it
// computes (core/layer_spec.h, Numerics: gates, f16_store, f16_rows; a Mamba-2 layer's norm_groups)
// and the layout it keeps its state in (StateLayout: conv_window, h_layout), and the conversion of
// state in that layout to the contract's. User: capture/capture.cpp (ssmc_set_layer_convention).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/layer_spec.h"
#include "core/tensor.h"

namespace ssm {

// How many conv columns the engine keeps: the contract's d_conv (column 0 oldest, the newest
// token's input last), or d_conv-1 (causal_conv1d's state in vLLM and SGLang: the contract's
// column 0, which no later step reads, is not kept).
enum class ConvWindow { d_conv, d_conv_minus_1 };
// The order of h's last two axes: the contract's [nv][kd][vd] (Mamba-2 [nh][hp][ns]), or swapped,
// [nv][vd][kd] (Mamba-2 [nh][ns][hp]), as some kernels store it.
enum class HLayout { kd_vd, vd_kd };

struct StateLayout {
  ConvWindow conv_window = ConvWindow::d_conv;
  HLayout h_layout = HLayout::kd_vd;
  bool is_contract() const { return conv_window == ConvWindow::d_conv && h_layout == HLayout::kd_vd; }
};

const char* to_string(ConvWindow w);                 // "d_conv" / "d_conv-1"
const char* to_string(HLayout l);                    // "nv,kd,vd" / "nv,vd,kd" (the names Python classes declare)
ConvWindow parse_conv_window(const std::string& s);  // throws std::invalid_argument
HLayout parse_h_layout(const std::string& s);        // throws std::invalid_argument

// The conventions a layer may declare, by name: gates, f16_store, f16_rows, conv_window, h_layout,
// norm_groups (a Mamba-2 layer's output norm groups: an integer, 0 for ng, 1 for the whole width).
const std::vector<std::string>& convention_names();
// Sets convention `name` to `value` in `layer` (its numerics, norm_groups) or `layout`.
// std::invalid_argument names an unknown convention ("unknown convention 'gate' (known: gates,
// ...; did you mean gates?)") or an unknown value ("gates 'tourch': expected clamped or torch");
// the layer is not validated here (LayerSpec::validate).
void set_convention(LayerSpec& layer, StateLayout& layout, const std::string& name, const std::string& value);

// The shape of one h-like field (h, its checkpoint, one intermediate) and one conv-like field as an
// engine in `layout` keeps it.
std::vector<int64_t> h_shape_in(const LayerSpec& s, const StateLayout& layout);
std::vector<int64_t> conv_shape_in(const LayerSpec& s, const StateLayout& layout);
// `t`, in the engine's layout (h_shape_in, conv_shape_in), in the contract's (LayerSpec::h_shape,
// [conv_dim][d_conv]). A short conv window comes back with column 0 zero: mark the state
// conv_oldest_column_absent (core/state.h), so that it is not compared. Throws
// std::invalid_argument when `t`'s shape is not the engine's.
// (By value: in the contract's layout already, `t` is moved through, not copied.)
Tensor h_to_contract(Tensor t, const LayerSpec& s, const StateLayout& layout);
Tensor conv_to_contract(Tensor t, const LayerSpec& s, const StateLayout& layout);

// Edit distance at most 2 between a and b (a likely misspelling), case-insensitive.
bool near_miss(const std::string& a, const std::string& b);

}  // namespace ssm
