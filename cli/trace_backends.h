// The backends `replay` and `gate` run on: "reference", "cuda" (built with CUDA and a device
// present) or "all" (every available one, with the reason each unavailable one was skipped).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "replay/gate.h"

namespace ssm::cli {

// Throws std::invalid_argument for an unknown name, or when a named backend is unavailable.
std::vector<replay::GateBackend> trace_backends(const std::string& which,
                                                std::vector<std::pair<std::string, std::string>>* skipped);

}  // namespace ssm::cli
