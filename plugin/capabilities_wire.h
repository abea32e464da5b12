// The capabilities of a hosted implementation on the wire (plugin/host_wire.h): the hello of a host
// carries them as one JSON object, {"h_modes": ["f32", ...], "checkpoint_async": bool,
// "rollback_and_checkpoint_async": bool, "snapshots": bool, "verify_arms": ["exact", "wy"],
// "pad_rows": bool, "max_batch": int, "max_verify_k": int, "max_slots": int}, every member
// optional (absent: the default of ssmp_capabilities without one, everything). The C host writes it
// from its plug-in's ssmp_capabilities; a Python class declares the same names as attributes
// (python/ssmcheck/bridge.py). An unknown member or a wrong value is refused by name. The members
// are named once, in capabilities_wire.cpp, with what each sets in Capabilities (core/capabilities.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/capabilities.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

nlohmann::json capabilities_json(const ssmp_capabilities& c);
// Throws std::runtime_error naming `who`, the member and what is wrong.
ssmp_capabilities capabilities_from_json(const nlohmann::json& j, const std::string& who);
// `c` with what `d` declares: its h modes, transitions, verify arms and limits (the layer kinds,
// PLE carry and async path come from the plug-in's flags and table, not from ssmp_capabilities).
Capabilities with_declared(Capabilities c, const ssmp_capabilities& d);

}  // namespace ssm::plugin
