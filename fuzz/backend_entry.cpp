// perturbed_entry (see backend_entry.h).
#include "fuzz/backend_entry.h"

#include <stdexcept>

namespace ssm::fuzz {

BackendEntry perturbed_entry(const BackendEntry& base) {
  BackendEntry e = base;
  e.name = kPerturbedPrefix + base.name;
  e.flag = kPerturbedPrefix + base.flag;
  e.summary = base.summary + ", its schedule perturbed (blocks in seeded orders over several waves, copies delayed)";
  e.perturbable = false;
  const std::string name = e.name;
  auto perturbed = [name](const BackendFactory& make) -> BackendFactory {
    return [name, make] {
      std::unique_ptr<Backend> b = make();
      if (!b->perturb_schedule(kPerturbSeed))
        throw std::invalid_argument("backend '" + name + "': " + b->name() +
                                    " offers no perturbed schedule (Backend::perturb_schedule; docs/cuda.md)");
      return b;
    };
  };
  e.make = perturbed(base.make);
  e.under_test = base.alternate_path ? perturbed(base.under_test) : e.make;
  return e;
}

}  // namespace ssm::fuzz
