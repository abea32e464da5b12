// The Mamba-2 row kernel's block layout (mamba2_rows_layout, cuda/mamba2_rows.h) for every head
// shape up to hp 128 and every ns the contract allows (1..256), FP32 and FP16 state, decode and the general
// instance, at the batch sizes that make it halve its warps (B = 1) and widen an FP16 decode to 32
// values per thread (B = 128, 8 heads): every state row of a head has a warp
// and every column a lane, no CTA is empty, and a block stays within 8 warps. A row's sums never
// leave its warp, so none of this changes a bit (the batch and verify gpu tests compare them);
// what it guards is coverage. Host code only: runs without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/mamba2_rows.h"

namespace ssm::test {
namespace {

TEST(Mamba2RowsLayout, EveryHeadShapeHasAWarpForEveryRowAndALaneForEveryColumn) {
  int shapes = 0;
  for (int hp = 1; hp <= 128; ++hp) {
    for (int ns = 1; ns <= 256; ++ns) {
      for (bool f16 : {false, true})
        for (bool one_row : {false, true})
          for (int B : {1, 128}) {
            const cuda::Mamba2RowsLayout L = cuda::mamba2_rows_layout(8, hp, ns, B, 132, f16, one_row);
            const std::string at = "hp=" + std::to_string(hp) + " ns=" + std::to_string(ns) +
                                   (f16 ? " f16" : " f32") + (one_row ? " decode" : "") + " B=" + std::to_string(B);
            ASSERT_EQ(L.vec, ns % 4 == 0 ? 4 : 1) << at;
            ASSERT_GE(L.nc * 32 * L.vec, ns) << at;  // every column has a lane
            if (L.vec == 4) {
              ASSERT_LE(L.nc, 2) << at;
              ASSERT_LT((L.nc - 1) * 32 * L.vec, ns) << at;  // ... and no column block is empty
            } else {  // one of the VEC 1 instances, the smallest that holds ns
              ASSERT_TRUE(L.nc == 1 || L.nc == 2 || L.nc == 4 || L.nc == 8) << at;
              ASSERT_LT(L.nc / 2 * 32, ns) << at;
            }
            ASSERT_EQ(L.vals, f16 && one_row && L.vec == 4 && B == 128 ? 32 : 16) << at;  // 1024+ CTAs at 16
            ASSERT_EQ(L.rpw, std::max(1, L.vals / (L.vec * L.nc))) << at;
            ASSERT_GE(L.warps, 1) << at;
            ASSERT_LE(L.warps, 8) << at;
            ASSERT_GE(L.ptiles * L.warps * L.rpw, hp) << at;        // every row has a warp
            ASSERT_LT((L.ptiles - 1) * L.warps * L.rpw, hp) << at;  // ... and no CTA is empty
          }
      ++shapes;
    }
  }
  EXPECT_EQ(shapes, 128 * 256);
}

TEST(Mamba2RowsLayout, NemotronHeadsTakeFullBlocksAndHalveForFewCtas) {
  // nh = 128, hp = 64, ns = 128 on 132 multiprocessors: float4 columns (VEC 4, one column block),
  // 16 state values per thread, so 4 rows per warp, 8 warps, 2 CTAs per head.
  const cuda::Mamba2RowsLayout L = cuda::mamba2_rows_layout(128, 64, 128, 32, 132, false, false);
  EXPECT_EQ(L.vec, 4);
  EXPECT_EQ(L.nc, 1);
  EXPECT_EQ(L.vals, 16);
  EXPECT_EQ(L.rpw, 4);
  EXPECT_EQ(L.warps, 8);
  EXPECT_EQ(L.ptiles, 2);
  // One sequence: 256 CTAs < 264 wanted, so the warps halve once (512 CTAs of 4 warps).
  const cuda::Mamba2RowsLayout one = cuda::mamba2_rows_layout(128, 64, 128, 1, 132, false, false);
  EXPECT_EQ(one.warps, 4);
  EXPECT_EQ(one.ptiles, 4);
  // FP16 decode: 32 values (8 rows per warp, a head per CTA) once the 16-value grid has more than
  // 4 CTAs per multiprocessor (B = 4: 1024 > 528); up to B = 2 (512 CTAs) it keeps 16.
  for (int B : {1, 2, 4, 32, 128}) {
    const cuda::Mamba2RowsLayout h = cuda::mamba2_rows_layout(128, 64, 128, B, 132, true, true);
    EXPECT_EQ(h.vals, B >= 4 ? 32 : 16) << "B=" << B;
    EXPECT_EQ(h.rpw, B >= 4 ? 8 : 4) << "B=" << B;
    EXPECT_EQ(h.ptiles * h.warps * h.rpw, 64) << "B=" << B;
    // FP16 verify (the general instance) and FP32 decode keep 16
    EXPECT_EQ(cuda::mamba2_rows_layout(128, 64, 128, B, 132, true, false).vals, 16) << "B=" << B;
    EXPECT_EQ(cuda::mamba2_rows_layout(128, 64, 128, B, 132, false, true).vals, 16) << "B=" << B;
  }
}

TEST(Mamba2RowsLayout, ForcedDecodeValuesApplyToFp16DecodeOnly) {
  struct Reset {
    ~Reset() { cuda::force_mamba2_decode_values(0); }
  } reset;
  cuda::force_mamba2_decode_values(32);
  EXPECT_EQ(cuda::mamba2_rows_layout(128, 64, 128, 1, 132, true, true).vals, 32);
  EXPECT_EQ(cuda::mamba2_rows_layout(128, 64, 128, 1, 132, true, false).vals, 16);
  EXPECT_EQ(cuda::mamba2_rows_layout(8, 64, 63, 1, 132, true, true).vals, 16);  // VEC 1
  cuda::force_mamba2_decode_values(16);
  EXPECT_EQ(cuda::mamba2_rows_layout(128, 64, 128, 128, 132, true, true).vals, 16);
  EXPECT_THROW(cuda::force_mamba2_decode_values(8), std::invalid_argument);
}

TEST(Mamba2RowsLayout, ColumnsBeyondTheContractAreRefused) {
  EXPECT_THROW(cuda::mamba2_rows_layout(8, 64, 257, 1, 132, false, false), std::invalid_argument);
  EXPECT_THROW(cuda::mamba2_rows_layout(8, 64, 0, 1, 132, true, true), std::invalid_argument);
  EXPECT_NO_THROW(cuda::mamba2_rows_layout(8, 64, 256, 1, 132, true, true));
  EXPECT_NO_THROW(cuda::mamba2_rows_layout(8, 64, 255, 1, 132, false, false));
}

TEST(Mamba2RowsLayout, OddColumnCountsTakeTheVec1Instances) {
  // mamba-odd-c's layers 2 and 3: ns 201 -> 7 blocks of 32, run by the 8-block instance (2 rows
  // per warp); ns 97 -> 4 blocks (4 rows per warp)
  const cuda::Mamba2RowsLayout a = cuda::mamba2_rows_layout(2, 5, 201, 1, 132, false, false);
  EXPECT_EQ(a.vec, 1);
  EXPECT_EQ(a.nc, 8);
  EXPECT_EQ(a.rpw, 2);
  const cuda::Mamba2RowsLayout b = cuda::mamba2_rows_layout(1, 7, 97, 1, 132, true, true);
  EXPECT_EQ(b.vec, 1);
  EXPECT_EQ(b.nc, 4);
  EXPECT_EQ(b.rpw, 4);
  EXPECT_EQ(b.vals, 16);  // the 32-value decode is VEC 4's
}

}  // namespace
}  // namespace ssm::test
