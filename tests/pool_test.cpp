// reference/pool.cpp: slot choice over tiered capacities, exhaustion, zeroing on reuse.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "tests/support/ref_harness.h"

namespace ssm::test {

namespace {
ref::ReferenceBackend tiered(const ModelSpec& spec, std::vector<int> caps) {
  ref::ReferenceBackend be;
  PoolConfig p;
  p.max_slots = int(caps.size());
  p.h_capacity = std::move(caps);
  p.conv_capacity = 8;
  be.create_pool(make_model(spec, GenConfig{}), p);
  return be;
}
}  // namespace

TEST(Pool, AllocPicksTheSmallestFreeSlotThatFits) {
  const ModelSpec spec = make_preset("tiny");
  ref::ReferenceBackend be = tiered(spec, {8, 2, 4, 2});
  EXPECT_EQ(be.alloc(3), 2);  // capacity 4 is the smallest >= 3
  EXPECT_EQ(be.alloc(0), 1);  // smallest capacity, lowest index
  EXPECT_EQ(be.alloc(0), 3);
  EXPECT_EQ(be.alloc(5), 0);
  try {
    be.alloc(0);
    FAIL() << "exhausted pool accepted an alloc";
  } catch (const StateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::pool_exhausted);
    EXPECT_NE(std::string(e.what()).find("0 of 4 slots free"), std::string::npos) << e.what();
  }
  be.release(1);
  try {
    be.alloc(3);
    FAIL() << "alloc beyond every free slot's capacity accepted";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("capacity >= 3"), std::string::npos) << e.what();
  }
}

TEST(Pool, ReusedSlotIsZeroed) {
  for (HMode mode : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    RefCase c("odd-a", mode, 3, 3, 1);
    c.backend->alloc(0);
    c.backend->prefill(0, c.inputs(1, 3));
    c.backend->checkpoint(0, false);
    c.backend->verify({0}, 3, VerifyArm::exact, {c.inputs(2, 3)});
    c.backend->release(0);
    ASSERT_EQ(c.backend->alloc(0), 0);
    const SequenceState s = c.backend->export_state(0);
    EXPECT_EQ(s.last_verify_k, 0);
    EXPECT_EQ(s.layers[0].h_is_f16, mode == HMode::f16_pool);
    for (const LayerState& l : s.layers) {
      EXPECT_FALSE(l.h_checkpoint.has_value());
      EXPECT_TRUE(l.h_intermediates.empty());
      for (int64_t i = 0; i < l.h.size(); ++i) ASSERT_EQ(l.h.get(i), 0.0f);
      for (int64_t i = 0; i < l.conv.size(); ++i) ASSERT_EQ(l.conv.get(i), 0.0f);
    }
    if (s.h_prefill_stage) {
      for (int64_t i = 0; i < s.h_prefill_stage->size(); ++i) ASSERT_EQ(s.h_prefill_stage->f32()[i], 0.0f);
    }
  }
}

TEST(Pool, ReleasedSlotCannotBeUsed) {
  RefCase c("tiny", HMode::f32, 1);
  c.backend->alloc(0);
  c.backend->release(0);
  EXPECT_THROW(c.backend->decode({0}, {c.inputs(1, 1)}), StateError);
  EXPECT_THROW(c.backend->export_state(0), StateError);
  EXPECT_THROW(c.backend->release(0), StateError);
}

TEST(Pool, BadConfigurationsAreRefused) {
  ref::ReferenceBackend be;
  PoolConfig p;
  p.max_slots = 0;
  EXPECT_THROW(be.create_pool(make_model(make_preset("tiny"), GenConfig{}), p), std::invalid_argument);
  Model m = make_model(make_preset("tiny"), GenConfig{});
  m.weights[1].A_log[0] = std::nanf("");
  try {
    be.create_pool(m, PoolConfig{});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1 weight A_log"), std::string::npos) << e.what();
  }
}

}  // namespace ssm::test
