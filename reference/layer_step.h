// The reference's one dispatch point on the layer kind: one token of one layer (GDN: gdn_step.cpp,
// Mamba-2: mamba2_step.cpp), and the state condition a fresh field starts with. Decode, prefill and
// verify call these and nothing kind-specific.
#pragma once
#include "reference/gdn_math.h"

namespace ssm::ref {

// Row t of the inputs r through the layer (s, w): h and window advance one token; out and cond
// (optional) point at the row's [out_dim] outputs; h_cond (optional) is the state's condition
// (GDN only: Mamba-2's state carries none); carried: as gdn_step.
void layer_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window, const LayerRows& r, size_t t,
                float* out, float* cond, StateCondition* h_cond, Tensor* carried = nullptr);

// The condition of a fresh h field: GDN's (gdn_math.h fresh_gdn_state_condition); empty for a kind
// whose state carries none (export and compare then skip it).
StateCondition fresh_state_condition(const LayerSpec& s);

}  // namespace ssm::ref
