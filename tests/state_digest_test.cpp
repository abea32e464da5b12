// State digests (core/state_digest.h) and the lockstep's skipping of unchanged sequences: the
// reference's in-place digest is the digest of its export after every op of a campaign, a change
// of any part compare_state reads changes the digest, and a campaign that skips unchanged
// sequences reaches the same ops and coverage as one that compares every sequence after every op.
// (That failures are found at the same cases: the mutant table, docs/mutants.md.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "core/state_digest.h"
#include "core/state_fields.h"
#include "fuzz/alt_reference.h"
#include "fuzz/campaign.h"
#include "fuzz/lockstep.h"
#include "reference/reference_backend.h"
#include "tests/support/cpu_campaign.h"
#include "tests/support/digest_checking.h"
#include "tests/support/ref_harness.h"

namespace ssm::test {
namespace {

// A claimed slot whose state has every part (ple-odd, f16-pool): a checkpoint, two intermediates,
// PLE carries with their checkpoint and snapshots, the stage.
int slot_with_every_part(RefCase& c) {
  ref::ReferenceBackend& b = *c.backend;
  const int s = b.alloc(4);
  b.prefill(s, c.inputs(0, 3));
  b.checkpoint(s, false);
  b.verify({s}, 3, VerifyArm::exact, {c.inputs(1, 3)});
  return s;
}

TEST(StateDigest, ReferenceDigestIsTheDigestOfItsExportAfterEveryOp) {
  auto log = std::make_shared<DigestCheckLog>();
  // the reference's digests are exactly those of its export (hashed in place)
  auto in_place = [](int s, const FieldDigests& d, const SequenceState& now, std::vector<std::string>& p) {
    if (d != ssm::field_digests(now))
      p.push_back("slot " + std::to_string(s) + ": the in-place digests are not the digests of the export");
  };
  const fuzz::CampaignOptions o = bitwise_campaign(20261201, 150, 40);
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), [&] {
    return std::unique_ptr<Backend>(new DigestChecking(std::make_unique<ref::ReferenceBackend>(), log, in_place));
  });
  std::printf("%s", r.summary().c_str());
  ASSERT_FALSE(r.failed) << r.summary();
  EXPECT_EQ(r.cases, o.cases);
  for (const std::string& p : log->problems) ADD_FAILURE() << p;
  // the draw covered the states that have the most parts (a campaign draws every preset, PLE ones
  // included, and every h mode), the skipping engaged, and digests were retaken both over changed
  // and over unchanged exports
  EXPECT_GT(r.coverage.axes.count("layers hosting a PLE carry"), 0u);
  EXPECT_GT(r.coverage.axes.count("h mode f16-pool"), 0u);
  EXPECT_GT(r.times.unchanged, 0);
  EXPECT_GT(r.times.compared, 0);
  EXPECT_GT(log->changed, 0);
  EXPECT_GT(log->unchanged, 0);
  // the lockstep updated its held exports field by field, keeping fields that had not changed
  EXPECT_GT(log->updates, 0);
  EXPECT_GT(log->fields_kept, 0);
  std::printf("%lld digests, %lld export updates keeping %lld fields\n", (long long)log->digests,
              (long long)log->updates, (long long)log->fields_kept);
}

// Every part of a state compare_state reads, changed alone, changes the digest.
TEST(StateDigest, EveryPartCompareReadsChangesTheDigest) {
  RefCase c("ple-odd", HMode::f16_pool, 5);
  ref::ReferenceBackend& b = *c.backend;
  const int s = slot_with_every_part(c);
  const SequenceState base = b.export_state(s);
  ASSERT_EQ(*b.field_digests(s), field_digests(base));
  ASSERT_TRUE(base.layers[0].h_checkpoint && base.layers[0].ple && base.layers[0].ple_checkpoint);
  ASSERT_EQ(base.layers[0].h_intermediates.size(), 2u);
  ASSERT_EQ(base.layers[0].ple_snapshots.size(), 3u);
  ASSERT_TRUE(base.h_prefill_stage && base.h_prefill_stage_condition);

  using Change = std::function<void(SequenceState&)>;
  auto flip = [](Tensor& t) {  // the lowest bit of the last element
    if (t.dtype() == DType::f32) {
      uint32_t x;
      std::memcpy(&x, t.f32() + t.size() - 1, 4);
      x ^= 1;
      std::memcpy(t.f32() + t.size() - 1, &x, 4);
    } else {
      t.f16()[t.size() - 1] ^= 1;
    }
  };
  const std::vector<std::pair<std::string, Change>> changes = {
      {"last_verify_k", [](SequenceState& x) { x.last_verify_k = 2; }},
      {"h bit", [&](SequenceState& x) { flip(x.layers[2].h); }},
      {"h shape", [](SequenceState& x) {
         Tensor& h = x.layers[0].h;
         Tensor t = Tensor::zeros(h.dtype(), {h.size()});
         std::memcpy(t.raw(), h.raw(), h.bytes());
         h = t;
       }},
      {"conv bit", [&](SequenceState& x) { flip(x.layers[1].conv); }},
      {"h_checkpoint absent", [](SequenceState& x) { x.layers[0].h_checkpoint.reset(); }},
      {"conv_checkpoint bit", [&](SequenceState& x) { flip(*x.layers[0].conv_checkpoint); }},
      {"h_intermediate bit", [&](SequenceState& x) { flip(x.layers[0].h_intermediates[1]); }},
      {"conv_intermediate dropped", [](SequenceState& x) { x.layers[0].conv_intermediates.pop_back(); }},
      {"h_is_f16", [](SequenceState& x) { x.layers[0].h_is_f16 = !x.layers[0].h_is_f16; }},
      {"h condition bit", [&](SequenceState& x) { flip(*x.layers[0].condition.h); }},
      {"h_intermediate condition bit", [&](SequenceState& x) { flip(x.layers[0].condition.h_intermediates[0]); }},
      {"conv_oldest_column_absent", [](SequenceState& x) { x.layers[0].conv_oldest_column_absent = true; }},
      {"ple history bit", [&](SequenceState& x) { flip(x.layers[0].ple->history); }},
      {"ple_checkpoint absent", [](SequenceState& x) { x.layers[2].ple_checkpoint.reset(); }},
      {"ple snapshot conv bit", [&](SequenceState& x) { flip(x.layers[2].ple_snapshots[2].conv); }},
      {"ple snapshot dropped", [](SequenceState& x) { x.layers[0].ple_snapshots.pop_back(); }},
      {"stage bit", [&](SequenceState& x) { flip(*x.h_prefill_stage); }},
      {"stage condition absent", [](SequenceState& x) { x.h_prefill_stage_condition.reset(); }},
      {"prefill_stage_absent", [](SequenceState& x) { x.prefill_stage_absent = true; }},
  };
  for (const auto& [what, change] : changes) {
    SequenceState x = base;
    change(x);
    EXPECT_NE(state_digest(x), state_digest(base)) << what;
  }
  // the slot index is not part of the state (the lockstep keys its cache by sequence)
  SequenceState moved = base;
  moved.slot += 1;
  EXPECT_EQ(state_digest(moved), state_digest(base));
}

// export_update after a decode keeps the fields a decode does not write (the checkpoints, the
// verify's intermediates and PLE snapshots: the same storage, not copied) and reads the others
// again, and gives export_state's state bit for bit; a change of the structure (a second verify of
// another K, a rollback, a checkpoint) is followed too.
TEST(StateFields, ExportUpdateKeepsTheUnchangedFieldsAndGivesTheExport) {
  RefCase c("ple-odd", HMode::f16_pool, 5);
  ref::ReferenceBackend& b = *c.backend;
  const int s = slot_with_every_part(c);
  SequenceState held = b.export_state(s);
  FieldDigests before = *b.field_digests(s);
  ASSERT_EQ(before, field_digests(held));
  const void* checkpoint = held.layers[0].h_checkpoint->raw();
  const void* intermediate = held.layers[1].h_intermediates[1].raw();

  b.decode({s}, {c.inputs(2, 1)});
  FieldDigests now = *b.field_digests(s);
  int unchanged = 0;
  for (const FieldDigest& f : now)
    for (const FieldDigest& g : before) unchanged += f.key == g.key && f.digest == g.digest && f.key.kind != FieldKind::rest;
  b.export_update(s, before, now, held);
  EXPECT_EQ(state_digest(held), state_digest(b.export_state(s)));
  EXPECT_EQ(held.layers[0].h_checkpoint->raw(), checkpoint) << "the checkpoint was copied again";
  EXPECT_EQ(held.layers[1].h_intermediates[1].raw(), intermediate) << "an intermediate was copied again";
  EXPECT_NE(tensor_digest(held.layers[0].h), before[0].digest);
  // per layer h, conv and the PLE carry changed; checkpoints, intermediates, snapshots and the stage did not
  EXPECT_GT(unchanged, 10);

  // a structural change each time: fewer intermediates, a rollback, a new checkpoint, FP16 live state
  const std::vector<std::function<void()>> ops = {
      [&] { b.verify({s}, 2, VerifyArm::exact, {c.inputs(3, 2)}); },
      [&] { b.rollback(s, 0, false); },
      [&] { b.checkpoint(s, false); },
      [&] { b.decode({s}, {c.inputs(4, 1)}); },
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    before = now;
    ops[i]();
    now = *b.field_digests(s);
    b.export_update(s, before, now, held);
    EXPECT_EQ(state_digest(held), state_digest(b.export_state(s))) << "after op " << i;
    EXPECT_EQ(now, field_digests(held)) << "after op " << i;
  }
  // no earlier digests: every field is read
  const int other = b.alloc(4);
  b.prefill(other, c.inputs(5, 2));
  SequenceState fresh;
  b.export_update(other, {}, *b.field_digests(other), fresh);
  EXPECT_EQ(state_digest(fresh), state_digest(b.export_state(other)));
}

// take_fields hands over the changed fields' storage and only theirs: after carry_unchanged_fields
// the carried fields are moved-from, so empty (Tensor's move), and are not taken.
TEST(StateFields, TakeFieldsTakesTheChangedFieldsOnly) {
  RefCase c("ple-odd", HMode::f16_pool, 5);
  ref::ReferenceBackend& b = *c.backend;
  const int s = slot_with_every_part(c);
  SequenceState held = b.export_state(s);
  const FieldDigests before = *b.field_digests(s);
  b.decode({s}, {c.inputs(2, 1)});
  const FieldDigests now = *b.field_digests(s);
  std::set<FieldKey> changed;
  for (size_t i = 0; i + 1 < now.size(); ++i)
    if (now[i].digest != before[i].digest) changed.insert(now[i].key);
  ASSERT_FALSE(changed.empty());
  SequenceState out;
  out.layers.resize(held.layers.size());
  const std::set<FieldKey> carried = carry_unchanged_fields(held, before, now, out);
  EXPECT_EQ(carried.size() + changed.size(), now.size() - 1);
  const std::map<FieldKey, Tensor> taken = take_fields(held);
  ASSERT_EQ(taken.size(), changed.size());
  for (const auto& [key, t] : taken) {
    EXPECT_TRUE(changed.count(key));
    EXPECT_FALSE(t.empty());
  }
  for (const FieldKey& k : carried) {
    const Tensor* husk = find_field(held, k);
    ASSERT_NE(husk, nullptr);
    EXPECT_TRUE(husk->empty() && husk->shape().empty() && husk->bytes() == 0) << "a moved-from tensor is empty";
  }
}

// Held exports dropped after every comparison (their bound at 0: only the sequence just compared
// keeps its export) give the same campaign, and every export update still matches a fresh export.
TEST(StateFields, DroppingHeldExportsKeepsTheCampaign) {
  const fuzz::CampaignOptions o = bitwise_campaign(20261203, 60, 40);
  auto log = std::make_shared<DigestCheckLog>();
  auto checked = [log] {
    return std::unique_ptr<Backend>(new DigestChecking(std::make_unique<ref::ReferenceBackend>(), log));
  };
  const fuzz::CampaignResult held = fuzz::run_campaign(o, reference(), checked);
  const int64_t updates_held = log->updates;
  fuzz::Lockstep::set_held_export_bytes(0);
  const fuzz::CampaignResult dropped = fuzz::run_campaign(o, reference(), checked);
  fuzz::Lockstep::set_held_export_bytes(size_t(4) << 30);
  std::printf("held: %sdropped: %s%lld and %lld export updates\n", held.summary().c_str(), dropped.summary().c_str(),
              (long long)updates_held, (long long)(log->updates - updates_held));
  ASSERT_FALSE(held.failed);
  ASSERT_FALSE(dropped.failed);
  for (const std::string& p : log->problems) ADD_FAILURE() << p;
  EXPECT_EQ(held.ops, dropped.ops);
  EXPECT_EQ(held.coverage.ops, dropped.coverage.ops);
  EXPECT_EQ(held.coverage.axes, dropped.coverage.axes);
  EXPECT_EQ(held.times.compared, dropped.times.compared);
  EXPECT_EQ(held.times.fields_unchanged, dropped.times.fields_unchanged);
  EXPECT_LT(log->updates - updates_held, updates_held) << "dropping should leave fewer updates";
}

// The same campaign with every sequence compared after every op (through a SUT that offers no
// digest, so the lockstep exports and hashes it, and a model whose digests are never equal
// twice) and with unchanged sequences skipped: the same ops, coverage and verdict.
class NeverSameDigest : public ref::ReferenceBackend {
 public:
  std::optional<FieldDigests> field_digests(int) override { return FieldDigests{{FieldKey{}, ++n_}}; }

 private:
  uint64_t n_ = 0;
};

class NoDigest : public fuzz::alt::AltReferenceBackend {
 public:
  std::optional<FieldDigests> field_digests(int) override { return std::nullopt; }
};

TEST(StateDigest, SkippingUnchangedSequencesKeepsTheCampaign) {
  const fuzz::CampaignOptions o = bitwise_campaign(11, 60, 40);
  const fuzz::CampaignResult skip = fuzz::run_campaign(o, reference(), [] {
    return std::unique_ptr<Backend>(new NoDigest());
  });
  const fuzz::CampaignResult all = fuzz::run_campaign(
      o, [] { return std::unique_ptr<Backend>(new NeverSameDigest()); }, alternate());
  std::printf("skipping: %severy sequence: %s", skip.summary().c_str(), all.summary().c_str());
  ASSERT_FALSE(skip.failed);
  ASSERT_FALSE(all.failed);
  EXPECT_GT(skip.times.unchanged, 0);
  EXPECT_EQ(all.times.unchanged, 0);
  EXPECT_EQ(skip.ops, all.ops);
  EXPECT_EQ(skip.case_ops, all.case_ops);
  EXPECT_EQ(skip.coverage.ops, all.coverage.ops);
  EXPECT_EQ(skip.coverage.axes, all.coverage.axes);
  EXPECT_EQ(skip.coverage.refusals, all.coverage.refusals);
}

}  // namespace
}  // namespace ssm::test
