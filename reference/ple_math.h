// The PLE carry's one row (STATE-MODEL section 7, docs/state-model.md "PLE carry"), in FP64 with
// its output rounded once. Kind-independent: decode, verify and prefill call it after the layer's
// own step on a layer that hosts a carry.
#pragma once
#include <cstddef>

#include "core/model.h"
#include "core/state.h"

namespace ssm::ref {

// Row t of the inputs r through the carry c of the layer (s, w): y[c] = sum_j W[c][j] *
// X[(k_size-1-j)*dilation rows back] over X = conv state ++ x, out = x + silu(y), then the conv
// state drops its oldest row and appends x, and the history drops its oldest id and appends the
// token. out and cond (optional) point at the row's [C] outputs; cond is the output's condition
// (compare/: the first-order bound on an FP32 implementation's error per unit roundoff,
// docs/tolerances.md "PLE output").
void ple_row(const LayerSpec& s, const LayerWeights& w, PleCarry& c, const LayerRows& r, size_t t, float* out,
             float* cond);

}  // namespace ssm::ref
