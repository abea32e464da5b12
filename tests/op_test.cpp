// core/op.h: every printed op parses back to itself; malformed scripts say what is wrong.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "core/errors.h"
#include "core/op.h"

namespace ssm {

TEST(Op, EveryKindRoundTrips) {
  for (OpKind k : all_op_kinds()) {
    Op op;
    op.kind = k;
    const bool no_args = k == OpKind::release || k == OpKind::decode || k == OpKind::checkpoint ||
                         k == OpKind::checkpoint_async || k == OpKind::to_f16;
    op.a = no_args ? 0 : k == OpKind::commit ? 2 : 3;
    op.b = k == OpKind::commit ? 4 : 0;
    const std::string s = to_string(op);
    EXPECT_EQ(parse_op(s), op) << s;
    op.seqs = op.is_batch() ? std::vector<int>{2, kPadRow, 0} : std::vector<int>{5};
    if (k == OpKind::verify) op.arm = VerifyArm::wy;
    EXPECT_EQ(parse_op(to_string(op)), op) << to_string(op);
  }
}

TEST(Op, ParsesTheIssueScript) {
  const auto ops = parse_script("alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode");
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[1].kind, OpKind::prefill);
  EXPECT_EQ(ops[1].a, 17);
  EXPECT_EQ(ops[4].kind, OpKind::commit);
  EXPECT_EQ(ops[4].a, 2);
  EXPECT_EQ(ops[4].b, 4);
  EXPECT_EQ(to_string(ops), "alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode");
}

TEST(Op, ScriptsTakeNewlinesCommentsAndSelectors) {
  const auto ops = parse_script("alloc @1  # second sequence\nalloc 2\n\ndecode @0,1,pad; verify 3 wy @1");
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].seqs, std::vector<int>{1});
  EXPECT_EQ(ops[1].a, 2);
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
