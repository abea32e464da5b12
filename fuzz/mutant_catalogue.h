// The public mutant catalogue: one deliberate bug per row, each a site in the shipped sources
// (SSM_MUTANT(name), core/mutant.h) that only a mutant build compiles in, covering the bug
// classes of the state model (docs/state-model.md, "Bug classes"). `ssmcheck mutants` runs the
// default gate against each (docs/mutants.md); tests/property_mutant_test.cpp and
// tests/property_gpu_mutant_test.cpp run them as tests.
#pragma once
#include <string>
#include <vector>

namespace ssm::fuzz {

struct MutantInfo {
  std::string name;     // the SSM_MUTANT site name and the value of SSMCHECK_MUTANT
  int bug_class = 0;    // 1..19 (docs/state-model.md, "Bug classes")
  std::string backend;  // gate backend that runs it: "reference" (the alternate path or the shared
                        // contract, CPU) or "cuda"
  std::string what;     // the bug, in one line
  // A data race: whether a campaign's comparison sees it depends on the GPU's timing (the same
  // gate found cuda_rows_missing_barrier at case 992 in one H200 run and not in 1000 cases in
  // the next), so its kill is compute-sanitizer racecheck reporting the race on this script
  // (`check --preset race_preset --backend cuda --ops race_ops`), with the shipped code clean on
  // the same script. Empty for every other mutant.
  std::string race_preset = {}, race_ops = {};
};

const std::vector<MutantInfo>& mutant_catalogue();
const MutantInfo* find_mutant(const std::string& name);  // nullptr when unknown

// Bug classes with no mutant yet, and why.
struct UncoveredClass {
  int bug_class;
  std::string why;
};
const std::vector<UncoveredClass>& uncovered_bug_classes();

}  // namespace ssm::fuzz
