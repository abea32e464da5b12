// Loading and storing one head of an h-like tensor in FP64 (the reference's compute precision),
// for every layer kind: a head is a [rows x cols] block starting at element `base` (GDN [kd x vd],
// Mamba-2 [hp x ns]). Storing rounds where the GPU stores: FP32 to nearest; FP16 as a kernel store
// (clamp, NaN -> -65504; or with F16Store::inf torch's conversion: overflow to inf).
#pragma once
#include <cstdint>

#include "reference/gdn_math.h"

namespace ssm::ref {

MatD load_head(const Tensor& h, int64_t base, int rows, int cols);  // FP16 widened exactly
// Returns the stored values widened back, which is what an output reads.
MatD store_head(F16Store store, Tensor& h, int64_t base, const MatD& H);

namespace detail {
// Test hook: on x86 CPUs with F16C the FP16 loads and stores above use its conversions (the same
// bits, head_store.cpp); off, they take core/half.h's portable ones. Returns whether this CPU has
// F16C (tests/head_store_test.cpp compares the two paths where it does).
bool set_f16c_path(bool on);
}  // namespace detail

}  // namespace ssm::ref
