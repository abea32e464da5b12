// A layer described by named attributes, as text: the names, meanings and types of the trace
// format's /model/layer<l> attributes (docs/trace-format.md), so that a boundary (the capture ABI's
// ssmc_add_layer_by_name, the plug-in ABI's ssmp_config.layer_descs) carries any layer kind
// without a struct of its own. formats/model_attrs.cpp writes and reads the same attributes in HDF5,
// each with its layer_attr_type, and adds nothing of its own but the group's kind and name.
//
// Values are text: integers in decimal, floats in the shortest text that reads back as the same
// FP32 value, "inf" for an unbounded dt_max, names for the conventions ("torch", "sigmoid").
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/layer_spec.h"

namespace ssm {

struct LayerAttr {
  std::string name;
  std::string value;
};

// The type of an attribute's value in a file: an integer (HDF5 int64), a real (FP32) or text.
enum class AttrType { integer, real, text };
// Throws std::invalid_argument for a name no layer kind carries.
AttrType layer_attr_type(const std::string& name);
// The text of a real value as layer_attrs gives it: the shortest that reads back as the same FP32
// value, "inf" and "-inf" (and "nan", which no attribute accepts).
std::string layer_attr_text(float x);

// What layer_from_attrs throws: what() the whole message, and apart, the attribute it concerns (""
// for the layer as a whole or an attribute no kind of layer carries) and what is wrong, without the
// `where` prefix: for a reader that names the place its own way (formats: "/model/layer0@eps").
class LayerAttrError : public std::invalid_argument {
 public:
  LayerAttrError(const std::string& what, std::string attr, std::string detail)
      : std::invalid_argument(what), attr_(std::move(attr)), detail_(std::move(detail)) {}
  const std::string& attr() const { return attr_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string attr_, detail_;
};

// The PLE geometry's attributes (a layer hosting a carry carries all five, one hosting none none).
const std::vector<std::pair<const char*, int PleSpec::*>>& ple_attr_members();

// The attributes a layer of `kind` may carry, in the order layer_attrs writes them: kind, the shape
// parameters, d_conv, conv_bias, the kind's options, the numerics, eps, the PLE geometry (GDN).
std::vector<std::string> layer_attr_names(LayerKind kind);

// The attributes that describe `s`, as a trace writes them (without "kind" and "name"): every
// required one, a GDN layer's output_gate, and each other optional one whose value is not its default.
std::vector<LayerAttr> layer_attrs(const LayerSpec& s);

// The layer `attrs` describe (`kind` given apart, as "gdn" or "mamba2"). Required: the shape
// parameters, d_conv, conv_bias and eps; the rest default to the contract's. Throws LayerAttrError
// naming the attribute: an unknown kind or name ("did you mean ...?"), a name given twice, a value
// that does not parse or is out of range, a missing one, part of the PLE geometry, or a layer
// LayerSpec::validate refuses. `where` prefixes every what() ("layer 2").
LayerSpec layer_from_attrs(const std::string& kind, const std::vector<LayerAttr>& attrs, const std::string& where);

}  // namespace ssm
