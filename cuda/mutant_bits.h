// Device-side mutant sites (core/mutant.h, fuzz/mutant_catalogue.cpp): the host passes the
// selected mutant as bits in the kernel parameters. In shipped builds the bits are always 0 and
// SSM_DEVICE_MUTANT(p, bit) is the constant false, so the site compiles away.
#pragma once
#include "core/mutant.h"

namespace ssm::cuda {

enum MutantBit : int {
  kMutInterStride = 1,          // cuda_inter_stride
  kMutNoSoftplusThreshold = 2,  // cuda_multirow_no_softplus_threshold
  kMutHStoreClamp = 4,          // cuda_h_store_clamp
  kMutDtBiasBf16 = 8,           // cuda_dt_bias_as_bf16
  kMutMissingBarrier = 16,      // cuda_rows_missing_barrier
  kMutConvOneWave = 32,         // cuda_conv_window_one_wave
};

// Host: the bits of the selected mutant (0 in shipped builds).
inline int device_mutant_bits() {
  return (SSM_MUTANT("cuda_inter_stride") ? kMutInterStride : 0) |
         (SSM_MUTANT("cuda_multirow_no_softplus_threshold") ? kMutNoSoftplusThreshold : 0) |
         (SSM_MUTANT("cuda_h_store_clamp") ? kMutHStoreClamp : 0) |
         (SSM_MUTANT("cuda_dt_bias_as_bf16") ? kMutDtBiasBf16 : 0) |
         (SSM_MUTANT("cuda_rows_missing_barrier") ? kMutMissingBarrier : 0) |
         (SSM_MUTANT("cuda_conv_window_one_wave") ? kMutConvOneWave : 0);
}

}  // namespace ssm::cuda

#ifdef SSMCHECK_MUTANTS
#define SSM_DEVICE_MUTANT(p, bit) (((p).mutants & (bit)) != 0)
#else
#define SSM_DEVICE_MUTANT(p, bit) false
#endif
