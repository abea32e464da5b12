// The reverse of PluginBackend: a Backend of this repository exposed through the plug-in C ABI
// (plugin/ssmcheck_plugin.h), so that ssmcheck's own implementations can be run as plug-ins and
// prove the ABI carries everything (reference_plugin.cpp, cuda_plugin.cpp). C++ exceptions
// become codes at the boundary: StateError a refusal of its kind, anything else SSMP_ERROR.
// Linked statically into each plug-in library, which exports only ssmcheck_plugin().
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/backend.h"
#include "plugin/ssmcheck_plugin.h"

namespace ssm::plugin {

struct ExposedBackend {
  std::string name;  // what the plug-in declares
  uint32_t flags = 0;  // SSMP_OWN_LEGALITY | SSMP_BITWISE | SSMP_MAMBA2 | SSMP_PLE (the table has the *_ple members)
  // Makes the instance from the options text ("key=value,..."); throws std::invalid_argument
  // for an option it does not know (create then fails with that message).
  std::function<std::unique_ptr<Backend>(const std::string& options)> make;
};

// The table of a plug-in library exposing `what` (called once, from its ssmcheck_plugin()).
const ssmp_plugin* expose(const ExposedBackend& what);

}  // namespace ssm::plugin
