// The delta-rule kernels' block layout (rows_layout, cuda/gdn_rows.h) for every head shape the
// layer spec allows (kd, vd <= 256), at the batch sizes that make it halve its column tiles: the
// warps are whole (kRowLanes x kColLanes lanes), every state row and column has a thread, no
// thread group or tile is empty, and what decides the order of the sums over rows (ty_n,
// ty_groups) depends on kd alone, never on the tiling, which is what keeps batched equal to one by
// one bit for bit. Host code only: runs without a device.
#include <gtest/gtest.h>

#include <string>

#include "cuda/gdn_rows.h"

namespace ssm::test {
namespace {

TEST(RowsLayout, EveryHeadShapeHasWholeWarpsAndATileForEveryColumn) {
  int shapes = 0;
  for (int kd = 1; kd <= 256; ++kd) {
    for (int vd = 1; vd <= 256; ++vd) {
      const cuda::RowsLayout one = cuda::rows_layout(kd, vd, 4, 1, 256, 264);  // B = 1: halves the tiles
      for (const cuda::RowsLayout& L : {one, cuda::rows_layout(kd, vd, 4, 128, 256, 264)}) {
        const std::string at = "kd=" + std::to_string(kd) + " vd=" + std::to_string(vd);
        ASSERT_EQ(L.vec, vd % 4 == 0 ? 4 : 1) << at;
        ASSERT_EQ(L.rpt * L.vec, 32) << at;
        ASSERT_GE(L.ty_n * L.rpt, kd) << at;                  // every state row has a thread row
        ASSERT_LT((L.ty_n - 1) * L.rpt, kd) << at;            // ... and no thread row is empty
        ASSERT_GE(L.ty_groups * cuda::kRowLanes, L.ty_n) << at;
        ASSERT_LT((L.ty_groups - 1) * cuda::kRowLanes, L.ty_n) << at;  // no empty group of warps
        ASSERT_GE(L.tx_n, 1) << at;
        ASSERT_EQ(L.tx_pad % cuda::kColLanes, 0) << at;
        ASSERT_GE(L.tx_pad, L.tx_n) << at;
        ASSERT_LT(L.tx_pad - L.tx_n, cuda::kColLanes) << at;
        ASSERT_EQ(L.threads, L.tx_pad * L.ty_groups * cuda::kRowLanes) << at;
        ASSERT_EQ(L.threads % 32, 0) << at;
        ASSERT_LE(L.threads, 256) << at;
        ASSERT_EQ(L.tj, L.tx_n * L.vec) << at;
        ASSERT_GE(L.ntiles * L.tj, vd) << at;                 // every column has a tile
        ASSERT_LT((L.ntiles - 1) * L.tj, vd) << at;           // ... and no tile is empty
        ASSERT_EQ(L.ty_n, one.ty_n) << at;                    // the order of the sums: kd's alone
        ASSERT_EQ(L.ty_groups, one.ty_groups) << at;
      }
      ++shapes;
    }
  }
  EXPECT_EQ(shapes, 256 * 256);
}

TEST(RowsLayout, Qwen3NextHeadsTakeFullBlocksAndHalveForFewItems) {
  // kd = vd = 128: 16 thread rows in 4 groups, 16 columns of float4 (two 64-column tiles).
  const cuda::RowsLayout L = cuda::rows_layout(128, 128, 32, 32, 256, 264);
  EXPECT_EQ(L.ty_n, 16);
  EXPECT_EQ(L.ty_groups, 4);
  EXPECT_EQ(L.tx_n, 16);
  EXPECT_EQ(L.threads, 256);
  EXPECT_EQ(L.ntiles, 2);
  // One sequence: 64 items < 264 wanted, so the tile halves once (32 columns, 128 items).
  const cuda::RowsLayout one = cuda::rows_layout(128, 128, 32, 1, 256, 264);
  EXPECT_EQ(one.tx_n, 8);
  EXPECT_EQ(one.threads, 128);
  EXPECT_EQ(one.ntiles, 4);
}

}  // namespace
}  // namespace ssm::test
