// A layer described by named attributes, as text: the names and meanings of the trace format's
// /model/layer<l> attributes (docs/trace-format.md), so that a boundary (the capture ABI's
// ssmc_add_layer_by_name, the plug-in ABI's ssmp_config.layer_descs) carries any layer kind
// without a struct of its own. formats/model_attrs.cpp writes and reads the same names in HDF5.
//
// Values are text: integers in decimal, floats in the shortest text that reads back as the same
// FP32 value, "inf" for an unbounded dt_max, names for the conventions ("torch", "sigmoid").
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/layer_spec.h"

namespace ssm {

struct LayerAttr {
  std::string name;
  std::string value;
};

// The PLE geometry's attributes (a layer hosting a carry carries all five, one hosting none none).
const std::vector<std::pair<const char*, int PleSpec::*>>& ple_attr_members();

// The attributes a layer of `kind` may carry, in the order layer_attrs writes them: kind, the shape
// parameters, d_conv, conv_bias, the kind's options, the numerics, eps, the PLE geometry (GDN).
std::vector<std::string> layer_attr_names(LayerKind kind);

// The attributes that describe `s`: every required one, and each optional one whose value is not
// its default (as a trace writes them; no "name").
std::vector<LayerAttr> layer_attrs(const LayerSpec& s);

// The layer `attrs` describe (`kind` given apart, as "gdn" or "mamba2"). Required: the shape
// parameters, d_conv, conv_bias and eps; the rest default to the contract's. Throws
// std::invalid_argument naming the attribute: an unknown kind or name ("did you mean ...?"), a name
// given twice, a value that does not parse or is out of range, a missing one, part of the PLE
// geometry, or a layer LayerSpec::validate refuses. `where` prefixes every message ("layer 2").
LayerSpec layer_from_attrs(const std::string& kind, const std::vector<LayerAttr>& attrs, const std::string& where);

}  // namespace ssm
