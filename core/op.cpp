// Op names, printing and the script parser (see op.h).
#include "core/op.h"

#include <cctype>
#include <stdexcept>
#include <utility>

namespace ssm {

namespace {
struct OpInfo {
  OpKind kind;
  const char* name;
  int min_args, max_args;  // integer args; verify also takes an optional arm word
};
constexpr OpInfo kOps[] = {
    {OpKind::alloc, "alloc", 0, 1},
    {OpKind::release, "release", 0, 0},
    {OpKind::prefill, "prefill", 1, 1},
    {OpKind::decode, "decode", 0, 0},
    {OpKind::checkpoint, "checkpoint", 0, 0},
    {OpKind::checkpoint_async, "checkpoint_async", 0, 0},
    {OpKind::verify, "verify", 1, 1},
    {OpKind::commit, "commit", 2, 2},
    {OpKind::rollback, "rollback", 1, 1},
    {OpKind::rollback_and_checkpoint_async, "rollback_and_checkpoint_async", 1, 1},
    {OpKind::to_f16, "to_f16", 0, 0},
    {OpKind::snapshot_save, "snapshot_save", 1, 1},
    {OpKind::snapshot_restore, "snapshot_restore", 1, 1},
};

const OpInfo& info(OpKind k) {
  for (const auto& i : kOps)
    if (i.kind == k) return i;
  throw std::logic_error("op kind without info");
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

int parse_count(const std::string& w, const std::string& what) {
  if (w.empty() || w.size() > 9) throw std::invalid_argument(what + " '" + w + "' is not a count");
  for (char c : w)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      throw std::invalid_argument(what + " '" + w + "' is not a non-negative integer");
  return std::stoi(w);
}

std::vector<int> parse_selector(const std::string& w) {  // w without '@'
  std::vector<int> seqs;
  size_t i = 0;
  while (i <= w.size()) {
    size_t j = w.find(',', i);
    if (j == std::string::npos) j = w.size();
    const std::string item = w.substr(i, j - i);
    seqs.push_back(item == "pad" ? kPadRow : parse_count(item, "sequence"));
    i = j + 1;
  }
  return seqs;
}
}  // namespace

Op Op::make(OpKind kind, int a, int b, std::vector<int> seqs) {
  Op op;
  op.kind = kind;
  op.a_ = a;
  op.b_ = b;
  op.seqs = std::move(seqs);
  if (a < 0 || b < 0)
    throw std::invalid_argument(std::string("Op::") + op_name(kind) + ": argument " + std::to_string(a < 0 ? a : b) +
                                " is negative (the script form takes counts >= 0)");
  return op;
}

Op Op::alloc(int min_capacity, int seq) { return make(OpKind::alloc, min_capacity, 0, {seq}); }
Op Op::release(int seq) { return make(OpKind::release, 0, 0, {seq}); }
Op Op::prefill(int T, int seq) { return make(OpKind::prefill, T, 0, {seq}); }
Op Op::decode(std::vector<int> seqs) { return make(OpKind::decode, 0, 0, std::move(seqs)); }
Op Op::checkpoint(int seq) { return make(OpKind::checkpoint, 0, 0, {seq}); }
Op Op::checkpoint_async(int seq) { return make(OpKind::checkpoint_async, 0, 0, {seq}); }
Op Op::verify(int K, VerifyArm arm, std::vector<int> seqs) {
  Op op = make(OpKind::verify, K, 0, std::move(seqs));
  op.arm = arm;
  return op;
}
Op Op::commit(int n, int k, int seq) { return make(OpKind::commit, n, k, {seq}); }
Op Op::rollback(int n, int seq) { return make(OpKind::rollback, n, 0, {seq}); }
Op Op::rollback_and_checkpoint_async(int n, int seq) {
  return make(OpKind::rollback_and_checkpoint_async, n, 0, {seq});
}
Op Op::to_f16(int seq) { return make(OpKind::to_f16, 0, 0, {seq}); }
Op Op::snapshot_save(int index, int seq) { return make(OpKind::snapshot_save, index, 0, {seq}); }
Op Op::snapshot_restore(int index, int seq) { return make(OpKind::snapshot_restore, index, 0, {seq}); }

int Op::arg(const char* accessor, OpKind k1, OpKind k2, int value) const {
  if (kind != k1 && kind != k2)
    throw std::logic_error(std::string("Op::") + accessor + "() called on '" + to_string(*this) + "', a " +
                           op_name(kind) + " (it belongs to " + op_name(k1) +
                           (k2 != k1 ? std::string(" and ") + op_name(k2) : std::string()) + ")");
  return value;
}

int Op::alloc_min_capacity() const { return arg("alloc_min_capacity", OpKind::alloc, OpKind::alloc, a_); }
int Op::prefill_tokens() const { return arg("prefill_tokens", OpKind::prefill, OpKind::prefill, a_); }
int Op::verify_rows() const { return arg("verify_rows", OpKind::verify, OpKind::verify, a_); }
int Op::commit_accepted() const { return arg("commit_accepted", OpKind::commit, OpKind::commit, a_); }
int Op::commit_verify_rows() const { return arg("commit_verify_rows", OpKind::commit, OpKind::commit, b_); }
int Op::rollback_n() const { return arg("rollback_n", OpKind::rollback, OpKind::rollback_and_checkpoint_async, a_); }
int Op::snapshot_index() const { return arg("snapshot_index", OpKind::snapshot_save, OpKind::snapshot_restore, a_); }

int Op::rows() const {
  switch (kind) {
    case OpKind::prefill: return prefill_tokens();
    case OpKind::decode: return 1;
    case OpKind::verify: return verify_rows();
    default: return 0;
  }
}

const char* op_name(OpKind k) { return info(k).name; }

std::vector<OpKind> all_op_kinds() {
  std::vector<OpKind> v;
  for (const auto& i : kOps) v.push_back(i.kind);
  return v;
}

std::string to_string(const Op& op) {
  const OpInfo& in = info(op.kind);
  std::string s = in.name;
  if (op.kind == OpKind::alloc) {
    if (op.a_ > 0) s += " " + std::to_string(op.a_);
  } else {
    if (in.max_args >= 1) s += " " + std::to_string(op.a_);
    if (in.max_args >= 2) s += " " + std::to_string(op.b_);
  }
  if (op.kind == OpKind::verify && op.arm == VerifyArm::wy) s += " wy";
  if (op.seqs != std::vector<int>{0}) {
    s += " @";
    for (size_t i = 0; i < op.seqs.size(); ++i)
      s += (i ? "," : "") + (op.seqs[i] == kPadRow ? std::string("pad") : std::to_string(op.seqs[i]));
  }
  return s;
}

std::string to_string(const std::vector<Op>& script) {
  std::string s;
  for (size_t i = 0; i < script.size(); ++i) s += (i ? "; " : "") + to_string(script[i]);
  return s;
}

Op parse_op(std::string_view text) {
  std::vector<std::string> w = split_words(text);
  const std::string where = "op '" + std::string(text) + "': ";
  if (w.empty()) throw std::invalid_argument(where + "empty");
  const OpInfo* in = nullptr;
  for (const auto& i : kOps)
    if (w[0] == i.name) in = &i;
  if (!in) {
    std::string known;
    for (const auto& i : kOps) known += (known.empty() ? "" : ", ") + std::string(i.name);
    throw std::invalid_argument(where + "unknown op '" + w[0] + "' (known: " + known + ")");
  }
  Op op;
  op.kind = in->kind;
  std::vector<int> args;
  try {
    for (size_t i = 1; i < w.size(); ++i) {
      if (w[i][0] == '@') {
        if (i + 1 != w.size()) throw std::invalid_argument("the @selector must come last");
        op.seqs = parse_selector(w[i].substr(1));
      } else if (op.kind == OpKind::verify && (w[i] == "wy" || w[i] == "exact")) {
        op.arm = w[i] == "wy" ? VerifyArm::wy : VerifyArm::exact;
      } else {
        args.push_back(parse_count(w[i], "argument"));
      }
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + e.what());
  }
  if (int(args.size()) < in->min_args || int(args.size()) > in->max_args)
    throw std::invalid_argument(where + "takes " + std::to_string(in->min_args) +
                                (in->max_args != in->min_args ? ".." + std::to_string(in->max_args) : "") +
                                " integer argument(s), got " + std::to_string(args.size()));
  if (!args.empty()) op.a_ = args[0];
  if (args.size() > 1) op.b_ = args[1];
  if (!op.is_batch() && op.seqs.size() != 1)
    throw std::invalid_argument(where + "only decode and verify take several sequences");
  if (!op.is_batch() && op.seqs[0] == kPadRow)
    throw std::invalid_argument(where + "only decode and verify take padding rows");
  return op;
}

std::vector<Op> parse_script(std::string_view text) {
  std::vector<Op> ops;
  size_t i = 0, line = 1;
  while (i <= text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] != ';' && text[j] != '\n') ++j;
    std::string_view item = text.substr(i, j - i);
    const size_t hash = item.find('#');
    if (hash != std::string_view::npos) {
      // a comment runs to the end of the line
      item = item.substr(0, hash);
      while (j < text.size() && text[j] != '\n') ++j;
    }
    if (!split_words(item).empty()) {
      try {
        ops.push_back(parse_op(item));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("script line " + std::to_string(line) + ", op " +
                                    std::to_string(ops.size()) + ": " + e.what());
      }
    }
    if (j < text.size() && text[j] == '\n') ++line;
    i = j + 1;
  }
  return ops;
}

std::string effect(const Op& op) {
  // n: what a rollback returns to, in words
  const auto restored = [](int n) {
    return n == 0 ? std::string("live <- checkpoint") : "live <- intermediates[" + std::to_string(n - 1) + "]";
  };
  switch (op.kind) {
    case OpKind::alloc: return "claims a zeroed slot (no checkpoint, no intermediates)";
    case OpKind::release: return "returns the slot to the pool";
    case OpKind::prefill: return std::to_string(op.prefill_tokens()) + " rows into live h and conv";
    case OpKind::decode: return "one row into live h and conv";
    case OpKind::checkpoint: return "checkpoint <- live (h, conv)";
    case OpKind::checkpoint_async: return "checkpoint <- live (h, conv), on the copy stream";
    case OpKind::verify: {
      const int K = op.verify_rows();
      const std::string n = std::to_string(K);
      if (K <= 1) return n + " row into live; no intermediates (K = 1)";
      return n + " rows into live; intermediates[0.." + std::to_string(K - 2) + "] <- the state after rows 0.." +
             std::to_string(K - 2) + (op.arm == VerifyArm::wy ? " (WY arm)" : "");
    }
    case OpKind::commit: {
      const int n = op.commit_accepted(), k = op.commit_verify_rows();
      return n == k ? "all " + std::to_string(n) + " rows kept: live unchanged"
                    : "live <- intermediates[" + std::to_string(n - 1) + "] (rows 0.." + std::to_string(n - 1) +
                          " of the verify's " + std::to_string(k) + " kept)";
    }
    case OpKind::rollback: return restored(op.rollback_n());
    case OpKind::rollback_and_checkpoint_async:
      return restored(op.rollback_n()) + ", then checkpoint <- live, on the copy stream";
    case OpKind::to_f16: return "h converted to FP16 (clamped to +-65504)";
    case OpKind::snapshot_save: return "snapshot " + std::to_string(op.snapshot_index()) + " <- live (h, conv)";
    case OpKind::snapshot_restore: return "live <- snapshot " + std::to_string(op.snapshot_index());
  }
  return "";
}

}  // namespace ssm
