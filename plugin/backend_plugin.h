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
  // Its async path (Backend::pause_async_copies holds copies): the table then has
  // pause_async_copies and async_pending; without one it has neither, and is not asked to reach it.
  bool async_copies = false;
  // What it runs beyond its flags (null: everything).
  const ssmp_capabilities* capabilities = nullptr;
  // Its perturbed schedule (Backend::perturb_schedule): the table then has perturb_schedule.
  bool perturbable = false;
  // Its field digests (Backend::field_digests gives them): the table then has field_digests.
  bool field_digests = false;
};

// The table of a plug-in library exposing `what` (called once, from its ssmcheck_plugin()).
const ssmp_plugin* expose(const ExposedBackend& what);

}  // namespace ssm::plugin
