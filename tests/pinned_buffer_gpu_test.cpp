// The process's cache of pinned blocks behind PinnedBuffer (cuda/pinned_buffer.h): a released
// buffer's block serves the next buffer that fits in it, the smallest that fits is taken, growing
// releases the old block, a block the bound cannot hold is freed, and a backend per case (what a
// campaign makes) pins its staging memory once.
#include <gtest/gtest.h>

#include <cstring>

#include "cuda/pinned_buffer.h"
#include "cuda_test_support.h"

namespace ssm::test {
namespace {

// Each test starts from an empty cache (the tests before leave blocks of their pools' sizes).
class PinnedBufferGpu : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    cuda::pinned_cache_trim();
    EXPECT_EQ(cuda::pinned_cache_bytes(), 0u);
  }
};

TEST_F(PinnedBufferGpu, ReleasedBlocksServeTheNextBuffersThatFit) {
  char *small = nullptr, *large = nullptr;
  {
    cuda::PinnedBuffer a, b;
    a.grow(1 << 20);
    b.grow(3 << 20);
    std::memset(a.get(), 1, a.bytes());  // host memory, written and read like any other
    small = a.get();
    large = b.get();
  }
  EXPECT_EQ(cuda::pinned_cache_bytes(), size_t(4) << 20);
  cuda::PinnedBuffer c;
  c.grow(1 << 19);  // the smallest block that holds it: the 1 MiB one, whole
  EXPECT_EQ(c.get(), small);
  EXPECT_EQ(c.bytes(), size_t(1) << 20);
  c.grow(c.bytes());  // no larger: kept
  EXPECT_EQ(c.get(), small);
  c.grow(2 << 20);  // larger: the 1 MiB block goes back, the 3 MiB one comes out
  EXPECT_EQ(c.get(), large);
  EXPECT_EQ(c.bytes(), size_t(3) << 20);
  EXPECT_EQ(cuda::pinned_cache_bytes(), size_t(1) << 20);
}

TEST_F(PinnedBufferGpu, ABlockBeyondTheBoundIsFreed) {
  { cuda::PinnedBuffer big; big.grow(cuda::kPinnedCacheBytes + 1); }
  EXPECT_EQ(cuda::pinned_cache_bytes(), 0u);
  {
    cuda::PinnedBuffer most, more;
    most.grow(cuda::kPinnedCacheBytes - 4096);
    more.grow(8192);
  }  // `more` goes back first and fits; `most` would pass the bound beside it
  EXPECT_EQ(cuda::pinned_cache_bytes(), 8192u);
}

TEST_F(PinnedBufferGpu, ABackendPerCaseReusesThePinnedMemory) {
  const ModelSpec spec = make_preset("odd-a", 2);
  GenConfig g;
  g.seed = 3;
  const Model m = make_model(spec, g);
  size_t cached = 0;
  for (int round = 0; round < 3; ++round) {
    {
      cuda::CudaBackend b;
      b.create_pool(m, PoolConfig{});
      const int s = b.alloc(1);
      (void)b.export_state(s);
    }
    // every block the backend pinned is back; the rounds after the first pin nothing new
    if (round > 0) {
      EXPECT_EQ(cuda::pinned_cache_bytes(), cached) << "round " << round;
    }
    cached = cuda::pinned_cache_bytes();
    EXPECT_GT(cached, 0u);
  }
}

}  // namespace
}  // namespace ssm::test
