// Likely causes a rerun confirms, for a campaign's failing case: an implementation that computes a
// convention it does not declare (torch gates, FP16 stores that overflow, rows carried in FP32)
// fails wherever the conventions differ, with nothing in its states to point at the cause. After
// shrinking, the campaign reruns the minimal case with the reference computing each single change
// of the case's conventions (core/numerics_alternatives.h); one under which the case passes is a
// hint, with the declaration that would make it the implementation's. Then the slips of the state
// model that leave nothing in the states to match (slip_hints): the case rerun with the reference
// mapping heads tiled, or writing each padding row's update into a live slot. The trace side:
// replay/convention_hints.h. docs/fuzzing.md, "Likely causes".
#pragma once
#include <string>
#include <vector>

#include "fuzz/campaign.h"

namespace ssm::fuzz {

// `config` and `script` fail (the campaign's minimal case, judged with `tol` and `strictness`).
// Each hint: "the case passes when the reference computes torch gates (...): plugin:x computes them
// without declaring it (SSMP_GATES_TORCH; a Python class: gates = \"torch\"; --gates torch)".
std::vector<std::string> convention_hints(const CaseConfig& config, const std::vector<Op>& script,
                                          const BackendFactory& model, const BackendFactory& sut,
                                          const cmp::Tolerances& tol, cmp::Strictness strictness,
                                          const Invariant& invariant, bool pause_async, const std::string& sut_name);

// The slips a rerun confirms (convention_hints ends with them): the case passes when the reference
// maps heads tiled instead of grouped (LayerSpec::tiled_heads; only where some layer's tiling
// differs: GDN nv/nk > 1 with nk > 1, Mamba-2 nh/ng > 1 with ng > 1), or when it writes each padding
// row's update into pool slot 0 or into the slot of the live row before it (only where the script
// has a padding row). Each hint names the rerun that passed.
std::vector<std::string> slip_hints(const CaseConfig& config, const std::vector<Op>& script, const BackendFactory& sut,
                                    const cmp::Tolerances& tol, cmp::Strictness strictness, const Invariant& invariant,
                                    bool pause_async, const std::string& sut_name);

// One rerun that confirms a slip: the reference making it, and what the hint says. A case passes
// (a trace replays) on `reference` where the implementation (the trace's producer) makes the slip.
// slip_hints words a case's hint "the case passes when the reference {reference_does}: {sut}
// {cause}?"; replay's (replay/convention_hints.h) names the op it agrees through.
struct SlipRerun {
  std::string reference_does;  // "maps heads tiled (GDN value head v reads key head v % nk instead of v / (nv/nk))"
  std::string cause;           // "maps its heads tiled instead of grouped (...)"
  BackendFactory reference;
};

// The reruns that can tell anything for a model of `layers` running `ops` (slip_hints' conditions:
// the tiled mapping where some layer's tiling differs; the two padding targets where a decode or
// verify in `ops` has a padding row), in the order slip_hints reports them.
std::vector<SlipRerun> slip_reruns(const std::vector<LayerSpec>& layers, const std::vector<Op>& ops);

}  // namespace ssm::fuzz
