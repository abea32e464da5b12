// The one list of backends every subcommand uses: the built-ins ("reference", "cuda") and
// plug-ins named `plugin:PATH.so[,key=value...]` (plugin/ssmcheck_plugin.h). Adding a built-in
// backend is one entry in backend_registry.cpp (README.md, "Command line", --backend).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "fuzz/backend_entry.h"

namespace ssm::cli {

// A built-in backend that cannot run on this machine (the CUDA one without a usable GPU). Not bad
// input: main() answers it with exit code 5, nothing was checked, as `mutants` does for the
// mutants of a backend it skips.
struct BackendUnavailable : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Every built-in backend with, where it cannot run here, why not ("" when it can).
std::vector<std::pair<fuzz::BackendEntry, std::string>> builtin_backends();
// Whether anything asked the CUDA runtime whether it can run (builtin_backends, find_backend of
// "cuda"): from then on CUDA_VISIBLE_DEVICES is read and --device can no longer apply.
bool cuda_probed();

// A built-in name or plugin:PATH.so[,key=value...] (loaded and checked now). Throws
// BackendUnavailable for a built-in that cannot run here, std::invalid_argument for an unknown
// name or a bad plug-in, naming it.
fuzz::BackendEntry find_backend(const std::string& name);

// "all": every available built-in (unavailable ones with their reason in *skipped, except cuda
// when --device named a GPU: then its absence throws BackendUnavailable); otherwise the one backend find_backend names.
std::vector<fuzz::BackendEntry> select_backends(const std::string& which,
                                                std::vector<std::pair<std::string, std::string>>* skipped);

// The numerics `name` computes: what a plug-in or python: backend declares (loaded now); the
// built-ins compute the contract's (checked without making them, so an unavailable one errs later,
// where it is made).
Numerics declared_numerics(const std::string& name);

// find_backend(name).make().
std::unique_ptr<Backend> make_backend(const std::string& name);

// For --backend's help: "reference, cuda or plugin:PATH.so[,key=value...]".
std::string backend_choices();

}  // namespace ssm::cli
