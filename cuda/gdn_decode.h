// Launcher of the row kernel (cuda/gdn_decode.cu): R rows of the delta rule per sequence on
// the state in registers. decode is R = 1; the exact verify arm is R = K with n_inter = K-1;
// prefill is R = T on FP32 state. Every case runs the same kernel instance with the same
// reduction order, so the exact arm equals K decodes bit for bit.
#pragma once
#include "cuda/gdn_rows.h"

namespace ssm::cuda {

// min_ctas: split head columns over more work items while there are fewer (bits do not change).
void launch_gdn_rows(RowsParams p, bool h_f16, int min_ctas, cudaStream_t stream);

}  // namespace ssm::cuda
