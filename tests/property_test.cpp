// The CPU campaign: the reference (model) against the reference driven through its alternate
// path (alt_reference), bitwise, over random op sequences of every kind. Exercises the whole
// campaign machinery (generation, lockstep comparison, coverage) in CI.
#include <gtest/gtest.h>

#include "fuzz/alt_reference.h"
#include "fuzz/campaign.h"
#include "fixtures/case_config.h"
#include "reference/reference_backend.h"
#include "tests/support/campaign_jobs.h"
#include "tests/support/cpu_campaign.h"

namespace ssm::test {


TEST(PropertyCpu, ReferenceAgreesWithItsAlternatePathBitwise) {
  fuzz::CampaignOptions o;
  o.seed = campaign_seed(20261129);
  o.cases = int(env_u64("SSMCHECK_CASES", 600));
  o.max_ops = int(env_u64("SSMCHECK_MAX_OPS", 60));
  o.strictness = cmp::Strictness::bitwise;
  o.progress = [](const std::string& line) { std::printf("  %s\n", line.c_str()); };
  const fuzz::CampaignResult r = fuzz::run_campaign(o, reference(), alternate());
  std::printf("%s", r.summary().c_str());
  ASSERT_FALSE(r.failed) << r.summary();
  ASSERT_FALSE(r.gave_up) << r.message;
  EXPECT_EQ(r.cases, o.cases);
  // every op kind ran and was accepted at least once, and illegal ops were refused
  for (OpKind k : all_op_kinds()) EXPECT_GT(r.coverage.ops.count(op_name(k)), 0u) << op_name(k);
  for (const char* kind : {"commit_zero", "commit_n_gt_k", "capacity", "rollback_range", "bad_slot"})
    EXPECT_GT(r.coverage.refusals.count(kind), 0u) << kind;
  EXPECT_GT(r.coverage.accepts.count("commit 1/3"), 0u);
  EXPECT_GT(r.coverage.accepts.count("rollback 0"), 0u);
}

TEST(PropertyCpu, SameSeedGivesTheSameCampaign) {
  fuzz::CampaignOptions o = bitwise_campaign(7, 8, 20);
  const fuzz::CampaignResult a = fuzz::run_campaign(o, reference(), alternate());
  const fuzz::CampaignResult b = fuzz::run_campaign(o, reference(), alternate());
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.coverage.ops, b.coverage.ops);
  EXPECT_EQ(a.coverage.accepts, b.coverage.accepts);
  o.seed += 1;
  const fuzz::CampaignResult c = fuzz::run_campaign(o, reference(), alternate());
  EXPECT_NE(a.coverage.ops, c.coverage.ops);
}

// The model's side of each op on a second thread (Lockstep's concurrent sides) or on the caller's:
// the same cases, ops, coverage and verdict.
TEST(PropertyCpu, ConcurrentSidesGiveTheSameCampaign) {
  fuzz::CampaignOptions o = bitwise_campaign(12, 40, 30);
  o.concurrent_sides = true;
  const fuzz::CampaignResult a = fuzz::run_campaign(o, reference(), alternate());
  o.concurrent_sides = false;
  const fuzz::CampaignResult b = fuzz::run_campaign(o, reference(), alternate());
  std::printf("concurrent: %ssequential: %s", a.summary().c_str(), b.summary().c_str());
  ASSERT_FALSE(a.failed);
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.case_ops, b.case_ops);
  EXPECT_EQ(a.coverage.ops, b.coverage.ops);
  EXPECT_EQ(a.coverage.axes, b.coverage.axes);  // the branch counts come from the model's thread
  EXPECT_EQ(a.coverage.refusals, b.coverage.refusals);
}

// Shrinking removes ops; a failing row must keep its inputs when an unrelated op goes away, so
// inputs are keyed by (sequence, its own input-consuming step), not by op index.
TEST(PropertyCpu, InputsSurviveTheRemovalOfUnrelatedOps) {
  CaseConfig c;
  c.preset = "odd-a";
  auto final_state = [&](const std::string& script) {
    ref::ReferenceBackend b;
    b.create_pool(c.model(), c.pool());
    Runner r(b, input_source(c.spec(), c.gen));
    int i = 0;
    for (const Op& op : parse_script(script)) r.run(op, i++);
    return b.export_state(r.slot_of(0));
  };
  const SequenceState full =
      final_state("alloc @0; alloc @1; prefill 3 @1; checkpoint @1; prefill 2 @0; decode @1,pad,0; verify 3 @0");
  const SequenceState shrunk = final_state("alloc @0; prefill 2 @0; decode @0; verify 3 @0");
  const cmp::StateReport rep = cmp::compare_state(full, shrunk, cmp::Tolerances::defaults(), cmp::Where{},
                                                  cmp::Strictness::bitwise);
  EXPECT_TRUE(rep.pass()) << rep.text();
  // and the key does change with the sequence's own history
  const SequenceState other = final_state("alloc @0; prefill 2 @0; decode @0; decode @0; verify 3 @0");
  EXPECT_FALSE(cmp::compare_state(full, other, cmp::Tolerances::defaults(), cmp::Where{},
                                  cmp::Strictness::bitwise).pass());
}

// A short bitwise campaign of the reference against its alternate path (the seed printed).
static fuzz::CampaignOptions short_campaign(uint64_t base, int cases) { return bitwise_campaign(base, cases, 20); }

// The gate's verdict must not depend on the machine: case i is the same whether 4 or 9 cases
// run, and a duration (checked between cases) only decides how many of those same cases run.
TEST(PropertyCpu, CaseIDoesNotDependOnHowManyCasesRan) {
  fuzz::CampaignOptions o = short_campaign(11, 4);
  const fuzz::CampaignResult few = fuzz::run_campaign(o, reference(), alternate());
  o.cases = 9;
  const fuzz::CampaignResult more = fuzz::run_campaign(o, reference(), alternate());
  ASSERT_EQ(few.case_ops.size(), 4u);
  ASSERT_EQ(more.case_ops.size(), 9u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(few.case_ops[i], more.case_ops[i]) << "case " << i;
  o.duration_s = 1e6;  // never reached: the same cases as the count bound
  const fuzz::CampaignResult timed = fuzz::run_campaign(o, reference(), alternate());
  EXPECT_EQ(timed.case_ops, more.case_ops);
  EXPECT_FALSE(timed.stopped_by_duration);
}

// --shard I/N: the N shards of a campaign run exactly its cases, each case as it runs unsharded,
// and a failing case fails in the shard that owns it with the same shrunk script.
TEST(PropertyCpu, ShardsPartitionTheCampaignExactly) {
  fuzz::CampaignOptions o = short_campaign(12, 10);
  const fuzz::CampaignResult whole = fuzz::run_campaign(o, reference(), alternate());
  ASSERT_EQ(whole.case_ops.size(), 10u);
  o.shards = 3;
  int64_t ops = 0;
  for (o.shard = 0; o.shard < 3; ++o.shard) {
    const fuzz::CampaignResult part = fuzz::run_campaign(o, reference(), alternate());
    ASSERT_EQ(part.case_ops.size(), size_t(o.shard == 0 ? 4 : 3)) << "shard " << o.shard;
    for (size_t k = 0; k < part.case_ops.size(); ++k)
      EXPECT_EQ(part.case_ops[k], whole.case_ops[size_t(o.shard) + 3 * k]) << "shard " << o.shard << " case " << k;
    ops += part.ops;
    EXPECT_NE(part.summary().find("shard " + std::to_string(o.shard) + "/3"), std::string::npos) << part.summary();
  }
  EXPECT_EQ(ops, whole.ops);
  o.shard = 3;
  EXPECT_THROW(fuzz::run_campaign(o, reference(), alternate()), std::invalid_argument);
}

// fuzz --jobs N: the records of N shard processes (run here in turn) merge into the campaign run in
// one process: the same cases, ops per case, coverage and summary. A shard runs without
// shrinking; an unsharded shard 1/2 of the whole splits again.
TEST(PropertyCpu, JobRecordsMergeIntoTheOneProcessCampaign) {
  fuzz::CampaignOptions o = short_campaign(13, 14);
  for (int shards : {1, 2}) {
    o.shards = shards;
    o.shard = shards - 1;
    const fuzz::CampaignResult whole = fuzz::run_campaign(o, reference(), alternate());
    ASSERT_FALSE(whole.failed) << whole.summary();
    for (int jobs : {1, 3, 5}) {
      const fuzz::CampaignResult merged = run_as_jobs(o, jobs, reference(), alternate());
      EXPECT_EQ(merged.cases, whole.cases) << jobs << " jobs";
      EXPECT_EQ(merged.ops, whole.ops) << jobs << " jobs";
      EXPECT_EQ(merged.case_ops, whole.case_ops) << jobs << " jobs";
      EXPECT_EQ(merged.coverage.axes, whole.coverage.axes) << jobs << " jobs";
      EXPECT_EQ(merged.coverage.total, whole.coverage.total) << jobs << " jobs";
      EXPECT_EQ(summary_without_times(merged), summary_without_times(whole)) << jobs << " jobs";
    }
  }
}

// A case record survives its JSON line; a damaged line is refused naming where it was.
TEST(PropertyCpu, CaseRecordsRoundTripAndBadLinesAreNamed) {
  fuzz::CampaignOptions o = short_campaign(14, 3);
  std::vector<fuzz::CaseRecord> records;
  o.on_case = [&records](const fuzz::CaseRecord& r) { records.push_back(r); };
  fuzz::run_campaign(o, reference(), alternate());
  ASSERT_EQ(records.size(), 3u);
  for (const fuzz::CaseRecord& r : records) {
    const fuzz::CaseRecord back = fuzz::case_record_from_json_line(fuzz::to_json_line(r), "here");
    EXPECT_EQ(back.index, r.index);
    EXPECT_EQ(back.campaign, fuzz::campaign_fingerprint(o));
    EXPECT_EQ(back.ops, r.ops);
    EXPECT_EQ(back.coverage.ops, r.coverage.ops);
    EXPECT_EQ(back.coverage.axes, r.coverage.axes);
    EXPECT_EQ(back.times.compared, r.times.compared);
    EXPECT_EQ(fuzz::to_json_line(back), fuzz::to_json_line(r));
  }
  for (const std::string& bad : {std::string("{"), std::string("{\"case\": 1}"),
                                fuzz::to_json_line(records[0]).replace(fuzz::to_json_line(records[0]).find("pass"), 4,
                                                                       "okay")}) {
    try {
      fuzz::case_record_from_json_line(bad, "f.jsonl:7");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("f.jsonl:7"), std::string::npos) << e.what();
    }
  }
}

// The merge checks what it is given: a case with no record or two, a case run in another
// campaign (a flag its process lost), and a case that failed in its process but passes when run
// again (a nondeterministic side), are errors, never a verdict.
TEST(PropertyCpu, MergeRefusesMissingRecordsAndUnrepeatableFailures) {
  fuzz::CampaignOptions o = short_campaign(15, 4);
  std::vector<fuzz::CaseRecord> records;
  fuzz::CampaignOptions rec = o;
  rec.on_case = [&records](const fuzz::CaseRecord& r) { records.push_back(r); };
  fuzz::run_campaign(rec, reference(), alternate());
  ASSERT_EQ(records.size(), 4u);
  std::vector<fuzz::CaseRecord> missing = records;
  missing.erase(missing.begin() + 2);
  EXPECT_THROW(fuzz::merge_case_records(o, missing, reference(), alternate()), std::logic_error);
  std::vector<fuzz::CaseRecord> twice = records;
  twice.push_back(records[1]);
  EXPECT_THROW(fuzz::merge_case_records(o, twice, reference(), alternate()), std::logic_error);
  // every option that decides the cases or their judgement changes the fingerprint; the
  // partition, shrinking and outputs do not (the processes run other shards, without shrinking)
  fuzz::CampaignOptions other = o;
  other.shard = 1;
  other.shards = 3;
  other.cases = 7;
  other.shrink = false;
  other.out_dir = "elsewhere";
  other.require_coverage = !o.require_coverage;
  EXPECT_EQ(fuzz::campaign_fingerprint(other), fuzz::campaign_fingerprint(o));
  for (const std::function<void(fuzz::CampaignOptions&)>& change :
       std::vector<std::function<void(fuzz::CampaignOptions&)>>{
           [](fuzz::CampaignOptions& c) { c.max_ops += 1; }, [](fuzz::CampaignOptions& c) { c.seed += 1; },
           [](fuzz::CampaignOptions& c) { c.preset = "tiny"; }, [](fuzz::CampaignOptions& c) { c.h_mode = HMode::f16; },
           [](fuzz::CampaignOptions& c) { c.pause_async = !c.pause_async; },
           [](fuzz::CampaignOptions& c) { c.tolerances.override_from("output.rtol=2e-3"); },
           [](fuzz::CampaignOptions& c) { c.numerics.f16_rows = F16Rows::carried; },
           [](fuzz::CampaignOptions& c) { c.caps.kinds = {LayerKind::gdn}; }}) {
    fuzz::CampaignOptions changed = o;
    change(changed);
    EXPECT_NE(fuzz::campaign_fingerprint(changed), fuzz::campaign_fingerprint(o));
  }
  std::vector<fuzz::CaseRecord> foreign = records;
  foreign[2].campaign ^= 1;
  try {
    fuzz::merge_case_records(o, foreign, reference(), alternate());
    ADD_FAILURE() << "a record of another campaign was merged";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("case " + std::to_string(records[2].index) + " was run in a campaign other"),
              std::string::npos)
        << e.what();
  }
  std::vector<fuzz::CaseRecord> claimed = records;
  claimed[1].status = fuzz::CaseRecord::Status::fail;
  try {
    fuzz::merge_case_records(o, claimed, reference(), alternate());
    ADD_FAILURE() << "a failure that does not repeat was merged";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not deterministic"), std::string::npos) << e.what();
  }
}

}  // namespace ssm::test
