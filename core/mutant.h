// Test-only mutants: deliberate bugs compiled into the shipped sources at marked sites, so that
// the harness can prove it catches them (docs/mutants.md; the list is fuzz/mutant_catalogue.cpp).
// In every shipped build SSM_MUTANT(name) is the constant false and the site compiles away. A
// mutant build (SSMCHECK_MUTANTS defined: the `ssmcheck-mutants` binary and the mutant tests)
// switches one site on at run time: the one named by the environment variable SSMCHECK_MUTANT,
// or by mutant::select() in a test.
#pragma once

#ifdef SSMCHECK_MUTANTS
#include <string>

namespace ssm::mutant {
bool active(const char* name);        // the selected mutant is `name`
const std::string& selected();        // "" when none
void select(const std::string& name);  // tests: overrides SSMCHECK_MUTANT ("" for none)
}  // namespace ssm::mutant
#define SSM_MUTANT(name) (::ssm::mutant::active(name))
#else
#define SSM_MUTANT(name) false
#endif
