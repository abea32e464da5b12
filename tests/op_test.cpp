// core/op.h: every printed op parses back to itself; malformed scripts say what is wrong.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "core/errors.h"
#include "core/op.h"

namespace ssm {

// One op of kind k built by its factory, with arguments distinct per position (3, or commit 2 4).
Op made(OpKind k, const std::vector<int>& seqs) {
  const int seq = seqs.at(0);
  switch (k) {
    case OpKind::alloc: return Op::alloc(3, seq);
    case OpKind::release: return Op::release(seq);
    case OpKind::prefill: return Op::prefill(3, seq);
    case OpKind::decode: return Op::decode(seqs);
    case OpKind::checkpoint: return Op::checkpoint(seq);
    case OpKind::checkpoint_async: return Op::checkpoint_async(seq);
    case OpKind::verify: return Op::verify(3, VerifyArm::wy, seqs);
    case OpKind::commit: return Op::commit(2, 4, seq);
    case OpKind::rollback: return Op::rollback(3, seq);
    case OpKind::rollback_and_checkpoint_async: return Op::rollback_and_checkpoint_async(3, seq);
    case OpKind::to_f16: return Op::to_f16(seq);
    case OpKind::snapshot_save: return Op::snapshot_save(3, seq);
    case OpKind::snapshot_restore: return Op::snapshot_restore(3, seq);
  }
  throw std::logic_error("no factory for this kind");
}

TEST(Op, EveryKindRoundTrips) {
  for (OpKind k : all_op_kinds()) {
    Op op = made(k, {0});
    EXPECT_EQ(op.kind, k);
    const std::string s = to_string(op);
    EXPECT_EQ(parse_op(s), op) << s;
    EXPECT_EQ(to_string(parse_op(s)), s);
    op = made(k, op.is_batch() ? std::vector<int>{2, kPadRow, 0} : std::vector<int>{5});
    EXPECT_EQ(parse_op(to_string(op)), op) << to_string(op);
  }
}

TEST(Op, FactoriesPrintTheScriptForm) {
  EXPECT_EQ(to_string(Op::alloc()), "alloc");
  EXPECT_EQ(to_string(Op::alloc(2, 1)), "alloc 2 @1");
  EXPECT_EQ(to_string(Op::prefill(17)), "prefill 17");
  EXPECT_EQ(to_string(Op::decode({0, 1, kPadRow})), "decode @0,1,pad");
  EXPECT_EQ(to_string(Op::verify(4)), "verify 4");
  EXPECT_EQ(to_string(Op::verify(3, VerifyArm::wy, {1, kPadRow})), "verify 3 wy @1,pad");
  EXPECT_EQ(to_string(Op::commit(2, 4, 1)), "commit 2 4 @1");
  EXPECT_EQ(to_string(Op::rollback(0)), "rollback 0");
  EXPECT_EQ(to_string(Op::rollback_and_checkpoint_async(2)), "rollback_and_checkpoint_async 2");
  EXPECT_EQ(to_string(Op::snapshot_save(1)), "snapshot_save 1");
  EXPECT_EQ(to_string(Op::snapshot_restore(0, 3)), "snapshot_restore 0 @3");
  const std::vector<Op> script = {Op::alloc(),   Op::prefill(17),  Op::checkpoint(),
                                  Op::verify(4), Op::commit(2, 4), Op::decode()};
  EXPECT_EQ(parse_script("alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode"), script);
  EXPECT_EQ(parse_op("commit 2 4 @1"), Op::commit(2, 4, 1));
  EXPECT_FALSE(Op::commit(2, 4) == Op::commit(2, 3));  // both arguments take part in ==
  EXPECT_FALSE(Op::commit(2, 4) == Op::commit(1, 4));
  EXPECT_FALSE(Op::verify(4) == Op::verify(4, VerifyArm::wy));
  // illegal but well-formed ops are built (the backend refuses them); negative arguments are not
  EXPECT_EQ(to_string(Op::commit(0, 4)), "commit 0 4");
  EXPECT_THROW(Op::prefill(-1), std::invalid_argument);
  EXPECT_THROW(Op::commit(1, -4), std::invalid_argument);
}

TEST(Op, NamedAccessorsReadTheirArgument) {
  EXPECT_EQ(Op::alloc().alloc_min_capacity(), 0);
  EXPECT_EQ(parse_op("alloc 4 @2").alloc_min_capacity(), 4);
  EXPECT_EQ(parse_op("prefill 17").prefill_tokens(), 17);
  EXPECT_EQ(parse_op("prefill 17").rows(), 17);
  const Op v = parse_op("verify 5 wy @1,pad");
  EXPECT_EQ(v.verify_rows(), 5);
  EXPECT_EQ(v.rows(), 5);
  EXPECT_EQ(v.arm, VerifyArm::wy);
  EXPECT_EQ(v.seqs, (std::vector<int>{1, kPadRow}));
  const Op c = parse_op("commit 2 4");
  EXPECT_EQ(c.commit_accepted(), 2);
  EXPECT_EQ(c.commit_verify_rows(), 4);
  EXPECT_EQ(c.rows(), 0);
  EXPECT_EQ(parse_op("rollback 3").rollback_n(), 3);
  EXPECT_EQ(parse_op("rollback_and_checkpoint_async 1").rollback_n(), 1);
  EXPECT_EQ(parse_op("snapshot_save 2").snapshot_index(), 2);
  EXPECT_EQ(parse_op("snapshot_restore 1").snapshot_index(), 1);
}

TEST(Op, AnAccessorOnAnotherKindThrowsNamingTheOp) {
  struct Accessor {
    const char* name;
    int (Op::*read)() const;
    std::set<OpKind> kinds;  // the kinds it belongs to
  };
  const Accessor accessors[] = {
      {"alloc_min_capacity", &Op::alloc_min_capacity, {OpKind::alloc}},
      {"prefill_tokens", &Op::prefill_tokens, {OpKind::prefill}},
      {"verify_rows", &Op::verify_rows, {OpKind::verify}},
      {"commit_accepted", &Op::commit_accepted, {OpKind::commit}},
      {"commit_verify_rows", &Op::commit_verify_rows, {OpKind::commit}},
      {"rollback_n", &Op::rollback_n, {OpKind::rollback, OpKind::rollback_and_checkpoint_async}},
      {"snapshot_index", &Op::snapshot_index, {OpKind::snapshot_save, OpKind::snapshot_restore}},
  };
  int throws = 0;
  for (OpKind k : all_op_kinds()) {
    const Op op = made(k, {0});
    for (const Accessor& a : accessors) {
      if (a.kinds.count(k)) {
        EXPECT_EQ((op.*a.read)(), k == OpKind::commit && a.read == &Op::commit_accepted ? 2
                                  : k == OpKind::commit                                 ? 4
                                                                                        : 3)
            << a.name << " on " << to_string(op);
        continue;
      }
      try {
        (void)(op.*a.read)();
        ADD_FAILURE() << a.name << " on '" << to_string(op) << "' did not throw";
      } catch (const std::logic_error& e) {
        ++throws;
        const std::string m = e.what();
        EXPECT_NE(m.find(a.name), std::string::npos) << m;
        EXPECT_NE(m.find("'" + to_string(op) + "'"), std::string::npos) << m;
      }
    }
  }
  EXPECT_EQ(throws, 13 * 7 - 9);  // 13 kinds x 7 accessors, 9 (kind, accessor) pairs belong
}

TEST(Op, ParsesTheIssueScript) {
  const auto ops = parse_script("alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode");
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[1].kind, OpKind::prefill);
  EXPECT_EQ(ops[1].prefill_tokens(), 17);
  EXPECT_EQ(ops[4].kind, OpKind::commit);
  EXPECT_EQ(ops[4].commit_accepted(), 2);
  EXPECT_EQ(ops[4].commit_verify_rows(), 4);
  EXPECT_EQ(to_string(ops), "alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode");
}

TEST(Op, ScriptsTakeNewlinesCommentsAndSelectors) {
  const auto ops = parse_script("alloc @1  # second sequence\nalloc 2\n\ndecode @0,1,pad; verify 3 wy @1");
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].seqs, std::vector<int>{1});
  EXPECT_EQ(ops[1].alloc_min_capacity(), 2);
  EXPECT_EQ(ops[2].seqs, (std::vector<int>{0, 1, kPadRow}));
  EXPECT_EQ(ops[3].arm, VerifyArm::wy);
  EXPECT_EQ(to_string(ops[2]), "decode @0,1,pad");
}

TEST(Op, MalformedOpsNameTheProblem) {
  auto message = [](const std::string& s) {
    try {
      parse_script(s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("alloc; frobnicate 3").find("unknown op 'frobnicate'"), std::string::npos);
  EXPECT_NE(message("alloc; frobnicate 3").find("op 1"), std::string::npos);
  EXPECT_NE(message("commit 2").find("takes 2 integer"), std::string::npos);
  EXPECT_NE(message("prefill -3").find("non-negative"), std::string::npos);
  EXPECT_NE(message("checkpoint @0,1").find("only decode and verify"), std::string::npos);
  EXPECT_NE(message("rollback 1 @pad").find("padding"), std::string::npos);
  EXPECT_NE(message("decode @0 5").find("selector must come last"), std::string::npos);
  EXPECT_NE(message("prefill 99999999999").find("not a count"), std::string::npos);
}

}  // namespace ssm

namespace ssm {
// The one list of error kinds: every kind named once, names round-trip, unknown names refused.
TEST(ErrorKinds, OneListWhoseNamesRoundTrip) {
  const std::vector<ErrorKind>& kinds = all_error_kinds();
  EXPECT_EQ(kinds.size(), 13u);
  std::set<std::string> names;
  for (ErrorKind k : kinds) {
    const std::string n = to_string(k);
    EXPECT_NE(n, "?");
    EXPECT_TRUE(names.insert(n).second) << n << " twice";
    ASSERT_TRUE(parse_error_kind(n).has_value()) << n;
    EXPECT_EQ(*parse_error_kind(n), k);
  }
  EXPECT_FALSE(parse_error_kind("snapshot_emptyy").has_value());
  EXPECT_NE(known_error_kinds().find("commit_k_mismatch"), std::string::npos);
}
}  // namespace ssm
