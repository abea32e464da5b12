// --device D (see device_option.h).
#include "cli/device_option.h"

#include <stdexcept>
#include <string>

#include "cli/backend_registry.h"
#include "core/device_select.h"

namespace ssm::cli {

namespace {
int g_device = -1;
}  // namespace

int device_requested() { return g_device; }

void add_device_option(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--device",
         [](const std::string& v) {
           size_t used = 0;
           int d = -1;
           try {
             d = std::stoi(v, &used);
           } catch (const std::exception&) {
             used = 0;
           }
           if (used != v.size() || v.empty()) throw std::invalid_argument("--device '" + v + "': expected a GPU index");
           // before any CUDA call: options are parsed before the command runs, and nothing that
           // builds the command line may start the runtime (cuda_probed guards it)
           if (cuda_probed())
             throw std::logic_error("--device: the CUDA runtime started before the flag was read (a bug of ssmcheck)");
           select_device(d);
           g_device = d;
         },
         "D: run CUDA work on GPU D of those visible (CUDA_VISIBLE_DEVICES narrowed to it; plug-ins and child "
         "processes follow); default: GPU 0")
      ->type_name("D");
}

}  // namespace ssm::cli
