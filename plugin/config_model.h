// The model an ssmp_config describes (plugin/ssmcheck_plugin.h): layer specs and FP32 weights,
// read through the kinds' geometry (LayerSpec::weights(), core/layer_geometry.cpp), for every side
// that receives a config: the adapter exposing a Backend as a plug-in (backend_plugin.cpp) and the
// C host of a hosted plug-in (host_server.cpp reads the same shapes from the wire); and the same
// model by name (layer_descs) for a by-name plug-in and the hosted table, which forwards it.
#pragma once
#include <cstddef>

#include "core/model.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

// Whether a struct of struct_size bytes (an older ssmcheck's may end earlier) holds the member at
// offset `at` of `size` bytes.
inline bool covers(size_t struct_size, size_t at, size_t size) { return struct_size >= at + size; }

// Throws std::invalid_argument naming the layer for an invalid shape or a missing weight.
Model model_of(const ssmp_config* c);

// The model of ssmp_config.layer_descs (SSMP_BY_NAME's layers): each layer from its kind and
// attributes through core's layer_from_attrs, its weights by the names its kind has
// (LayerSpec::weights), each of that shape. Throws std::invalid_argument naming the layer and what
// is wrong (an attribute, a weight missing, unknown or of another shape), or that the config has no
// layer_descs (has_layer_descs).
Model model_of_descs(const ssmp_config* c);
bool has_layer_descs(const ssmp_config* c);

// The pool an ssmp_config describes (h mode, slots and their capacities, snapshot slots).
PoolConfig pool_of(const ssmp_config* c);

}  // namespace ssm::plugin
