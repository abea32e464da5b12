// Likely causes of a divergent state: what the diverging fields resemble among the slips the state
// model knows, each hint with the check that confirmed it. compare_state attaches them to its
// report when it fails (StateReport::hints), so every lockstep, replay and diff names them:
//   - a field one step off: the live h or conv (or an intermediate) equal to one of the
//     reference's intermediates or its checkpoint, read against the op (`commit n k` must restore
//     intermediate n-1, `rollback n` intermediate n-1 or the checkpoint), and a checkpoint equal to
//     the live state ("commit restores intermediate n instead of n-1?");
//   - h in the transposed layout (the last two axes swapped: [nv][vd][kd] exported as the
//     contract's [nv][kd][vd], a missing SSMP_H_VD_KD);
//   - the conv window shifted by a column (shifted twice, or not shifted);
//   - FP16 stores that overflow to inf where the contract saturates at +-65504 (or the reverse).
// Slips and conventions that leave nothing in the states to match are confirmed by rerunning the case
// with the reference computing them (fuzz/convention_hints.h: torch gates, FP16 stores that
// overflow, rows carried in FP32, heads mapped tiled instead of grouped, a padding row written into
// a live slot; replay/convention_hints.h for traces).
// A hint is given only when the field differs from the reference's and matches the candidate far
// better (relative max error <= 1e-3 and under a tenth of its error against the reference): a
// correct field never gets one. docs/fuzzing.md ("Likely causes") lists the checks.
#pragma once
#include <string>
#include <vector>

#include "core/state.h"

namespace ssm::cmp {

// op_text: the op after which the states were exported, in its printable form ("commit 1 3"; ""
// when unknown), to read a match against what the op should have done.
std::vector<std::string> likely_causes(const SequenceState& ref, const SequenceState& got, const std::string& op_text);

// A report's text once a rerun has confirmed a cause (fuzz/convention_hints.h, replay/convention_hints.h):
// the rerun reproduces the whole case (or trace), a resemblance matches one field, and a confirmed
// slip can leave a field looking like another one (a padding row written into slot 0 leaves its conv
// window one column on, which reads as a window not shifted). Each "  likely cause: " line of
// `report_text` (the resemblances StateReport::text prints) becomes "  resembles (outranked by the
// cause a rerun confirmed): ..."; `report_text` is returned as it is when `confirmed` is 0.
std::string outranked_by_reruns(std::string report_text, size_t confirmed);

}  // namespace ssm::cmp
