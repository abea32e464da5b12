// Launcher of the row kernel (cuda/gdn_decode.cu): R rows of the delta rule per sequence on
// the state in registers. decode is R = 1; the exact verify arm is R = K with n_inter = K-1;
// prefill is R = T on FP32 state. Every case runs the same kernel template with the same
// reduction order (decode its ONE_ROW instance, without the row loop), so the exact arm equals K
// decodes bit for bit.
#pragma once
#include "cuda/gdn_rows.h"

namespace ssm::cuda {

// min_ctas: split head columns over more work items while there are fewer (bits do not change).
void launch_gdn_rows(RowsParams p, bool h_f16, int min_ctas, cudaStream_t stream);

// Tests: FP16 state with vd % 4 == 0 runs a 2- or a 4-CTA-per-SM build of the row kernel, chosen
// by the work (0, the default); 2 or 4 forces one, for every launch of this process until reset.
void force_rows_ctas_per_sm(int ctas);

}  // namespace ssm::cuda
