// perturbed_entry and the label of the side under test (see backend_entry.h).
#include "fuzz/backend_entry.h"

#include <stdexcept>

namespace ssm::fuzz {

std::string no_perturbed_schedule(const std::string& entry, const std::string& impl) {
  return "backend '" + entry + "': " + impl +
         " offers no perturbed schedule (Backend::perturb_schedule, a plug-in's perturb_schedule or a Python "
         "class's; docs/cuda.md, \"Perturbed schedules\")";
}

std::string BackendEntry::under_test_label() const {
  return (perturbed ? std::string(kPerturbedPrefix) : std::string()) + under_test()->name();
}

BackendEntry perturbed_entry(const BackendEntry& base) {
  BackendEntry e = base;
  e.name = kPerturbedPrefix + base.name;
  e.flag = kPerturbedPrefix + base.flag;
  e.summary = base.summary + ", its schedule perturbed (blocks in seeded orders over several waves, copies delayed)";
  e.perturbable = false;
  e.perturbed = true;
  const std::string name = e.name;
  auto perturbed = [name](const BackendFactory& make) -> BackendFactory {
    return [name, make] {
      std::unique_ptr<Backend> b = make();
      if (!b->perturb_schedule(kPerturbSeed)) throw std::invalid_argument(no_perturbed_schedule(name, b->name()));
      return b;
    };
  };
  e.make = perturbed(base.make);
  e.under_test = base.alternate_path ? perturbed(base.under_test) : e.make;
  return e;
}

}  // namespace ssm::fuzz
