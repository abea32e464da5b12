// --device D (fuzz, gate, check, replay, mutants): the GPU the command's CUDA work runs on
// (core/device_select.h: CUDA_VISIBLE_DEVICES narrowed to D before the runtime starts, so
// plug-ins and child processes follow).
#pragma once
#include <CLI/CLI.hpp>

namespace ssm::cli {

void add_device_option(CLI::App* cmd);
// The GPU --device named in this process, -1 when none.
int device_requested();

}  // namespace ssm::cli
