// reference/snapshot.cpp: prefix-cache snapshots move live state between sequences.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "tests/support/ref_harness.h"

namespace ssm::test {

TEST(Snapshot, RestoreIntoAnotherSequenceCopiesLiveState) {
  for (HMode mode : {HMode::f32, HMode::f16, HMode::f16_pool}) {
    RefCase c("odd-b", mode, 21);
    SCOPED_TRACE(c.name());
    c.backend->alloc(0);
    c.backend->alloc(0);
    c.backend->prefill(0, c.inputs(1, 5));
    c.backend->snapshot_save(0, 1);
    const SequenceState saved = c.backend->export_state(0);
    c.backend->decode({0}, {c.inputs(2, 1)});
    c.backend->prefill(1, c.inputs(3, 2, 1));
    c.backend->snapshot_restore(1, 1);
    EXPECT_EQ(state_diff(c.backend->export_state(1), saved, true), "");
  }
}

TEST(Snapshot, ErrorsNameTheSnapshot) {
  RefCase c("tiny", HMode::f32, 2);
  c.backend->alloc(0);
  try {
    c.backend->snapshot_restore(0, 0);
    FAIL();
  } catch (const StateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::snapshot_empty);
  }
  try {
    c.backend->snapshot_save(0, 7);
    FAIL();
  } catch (const StateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_argument);
    EXPECT_NE(std::string(e.what()).find("snapshot 7"), std::string::npos);
  }
}

}  // namespace ssm::test
