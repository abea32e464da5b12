// The state's fields as the plug-in ABI names them (ssmp_field.name, plugin/ssmcheck_plugin.h) and
// as ssmcheck keys them (core/state_fields.h), for both sides of ssmp_plugin.field_digests: the
// Backend that drives a plug-in (plugin_backend.cpp) and the adapter that exposes one of this
// repository's Backends as a plug-in (backend_plugin.cpp).
#pragma once
#include <optional>
#include <string>

#include "core/state_fields.h"

namespace ssm::plugin {

// The key of a field as the ABI names it ("h", "conv_checkpoint", "h_intermediate",
// "ple_history_snapshot", ..., "h_prefill_stage" of layer -1) at a layer and index t (kept only for
// an indexed field); nullopt for a name that is no state field.
std::optional<FieldKey> field_key_of(const std::string& name, int layer, int index);

}  // namespace ssm::plugin
