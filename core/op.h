// The op vocabulary of STATE-MODEL section 4, with canonical printable names and a parser.
// Script: ops separated by ';' or newlines, each "name arg... [@sel]", e.g.
//   alloc; prefill 17; checkpoint; verify 4; commit 2 4; decode
//   alloc @1; decode @0,1,pad; verify 3 wy @1,0
// The selector names logical sequences (default @0); batch ops (decode, verify) take several,
// and "pad" for a padding row that runs on the dummy slot. '#' starts a comment.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

enum class OpKind {
  alloc, release, prefill, decode, checkpoint, checkpoint_async, verify, commit, rollback,
  rollback_and_checkpoint_async, to_f16, snapshot_save, snapshot_restore,
};
enum class VerifyArm { exact, wy };  // exact: bitwise K decodes; wy: multi-row algebraic form

constexpr int kPadRow = -1;  // selector entry of a padding row

// To add an op: its OpKind and a row of kOps (core/op.cpp: name, integer arguments), a factory and a
// kind-checked accessor per argument here, its effect() line, then its Backend method
// (core/backend.h), Runner::apply (core/runner.cpp) and the legality table (fuzz/legality.cpp).
struct Op {
  OpKind kind = OpKind::decode;
  VerifyArm arm = VerifyArm::exact;
  std::vector<int> seqs = {0};  // logical sequences; kPadRow for padding (batch ops only)

  // Factories, one per kind (STATE-MODEL section 4). The non-batch ops name one sequence. A negative
  // argument throws std::invalid_argument (the script form has none); any other value is kept, so
  // that illegal ops (commit 0 4) can be built and refused.
  static Op alloc(int min_capacity = 0, int seq = 0);  // min_capacity 0: any slot
  static Op release(int seq = 0);
  static Op prefill(int T, int seq = 0);
  static Op decode(std::vector<int> seqs = {0});
  static Op checkpoint(int seq = 0);
  static Op checkpoint_async(int seq = 0);
  static Op verify(int K, VerifyArm arm = VerifyArm::exact, std::vector<int> seqs = {0});
  static Op commit(int n, int k, int seq = 0);  // n accepted rows of a verify of K = k rows
  static Op rollback(int n, int seq = 0);
  static Op rollback_and_checkpoint_async(int n, int seq = 0);
  static Op to_f16(int seq = 0);
  static Op snapshot_save(int index, int seq = 0);
  static Op snapshot_restore(int index, int seq = 0);

  // The arguments by name. Each one throws std::logic_error naming the op when called on another kind.
  int alloc_min_capacity() const;  // alloc: the fewest h intermediates the slot must hold (0: any)
  int prefill_tokens() const;      // prefill: T
  int verify_rows() const;         // verify: K (row 0 the anchor, rows 1..K-1 drafts)
  int commit_accepted() const;     // commit: n = accepted rows = accepted drafts + 1
  int commit_verify_rows() const;  // commit: k = the K of the verify it commits
  // rollback, rollback_and_checkpoint_async: n; 0 restores the checkpoint, n >= 1 intermediates[n-1]
  int rollback_n() const;
  int snapshot_index() const;  // snapshot_save, snapshot_restore: the snapshot slot

  bool is_batch() const { return kind == OpKind::decode || kind == OpKind::verify; }
  // Prefill and the batch ops consume token inputs (one input set per selected sequence).
  bool takes_inputs() const { return kind == OpKind::prefill || is_batch(); }
  int rows() const;  // tokens per sequence the op consumes: T, 1, K or 0
  bool operator==(const Op& o) const {
    return kind == o.kind && a_ == o.a_ && b_ == o.b_ && arm == o.arm && seqs == o.seqs;
  }

 private:
  // The integer arguments in script order, read through the named accessors above; only the
  // script printer and parser (which go by the arity table) touch them directly.
  int a_ = 0;
  int b_ = 0;
  friend std::string to_string(const Op& op);
  friend Op parse_op(std::string_view text);
  static Op make(OpKind kind, int a, int b, std::vector<int> seqs);
  int arg(const char* accessor, OpKind k1, OpKind k2, int value) const;
};

const char* op_name(OpKind k);
std::vector<OpKind> all_op_kinds();
std::string to_string(const Op& op);  // canonical form; parse_op(to_string(op)) == op
std::string to_string(const std::vector<Op>& script);  // ops joined by "; "
// What a legal op does to the state, in words (STATE-MODEL section 4), for people reading a run:
// "live <- intermediates[1] (rows 0..1 of the verify's 4 kept)" for commit 2 4.
std::string effect(const Op& op);
// Throw std::invalid_argument naming the op index, its text and what is wrong.
Op parse_op(std::string_view text);
std::vector<Op> parse_script(std::string_view text);

}  // namespace ssm
