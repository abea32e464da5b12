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

struct Op {
  OpKind kind = OpKind::decode;
  int a = 0;  // prefill T | verify K | commit n | rollback n | snapshot index | alloc min capacity
  int b = 0;  // commit k
  VerifyArm arm = VerifyArm::exact;
  std::vector<int> seqs = {0};  // logical sequences; kPadRow for padding (batch ops only)

  bool is_batch() const { return kind == OpKind::decode || kind == OpKind::verify; }
  // Prefill and the batch ops consume token inputs (one input set per selected sequence).
  bool takes_inputs() const { return kind == OpKind::prefill || is_batch(); }
  int rows() const;  // tokens per sequence the op consumes: T, 1, K or 0
  bool operator==(const Op& o) const {
    return kind == o.kind && a == o.a && b == o.b && arm == o.arm && seqs == o.seqs;
  }
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
