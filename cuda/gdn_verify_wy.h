// Launcher of the WY verify arm (cuda/gdn_verify_wy.cu). p.R = K (1..kWyMaxRows),
// p.n_inter = K - 1.
#pragma once
#include "cuda/gdn_rows.h"

namespace ssm::cuda {

constexpr int kWyMaxRows = 8;  // larger K runs the exact arm
void launch_gdn_verify_wy(RowsParams p, bool h_f16, int min_ctas, cudaStream_t stream);

}  // namespace ssm::cuda
