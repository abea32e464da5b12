// An independent statement of which ops are legal (STATE-MODEL sections 4-6), written as a
// table of rules over its own per-sequence bookkeeping, without core/contract.cpp. Both sides
// of a lockstep refuse ops through the same Contract, so a slip there (k != last K accepted, a
// capacity check off by one) would be invisible to a comparison of the two; the lockstep checks
// every op's outcome against this model as well (docs/fuzzing.md, "Legality").
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/model.h"
#include "core/op.h"

namespace ssm::fuzz {

// What the contract says about one op: legal, or refused with this kind (and why, in words).
struct Verdict {
  bool legal = true;
  ErrorKind kind = ErrorKind::bad_argument;
  std::string rule;  // the rule that refuses it, e.g. "commit: n == 0"
};

class LegalityModel {
 public:
  LegalityModel(const ModelSpec& spec, const PoolConfig& pool);

  // Judges an op on logical sequences (as a Runner takes it) without changing anything.
  Verdict judge(const Op& op) const;
  // Applies a legal op's effects on the bookkeeping (call only after both sides accepted it).
  void apply(const Op& op);

 private:
  struct Seq {
    int slot = 0;
    bool h_f16 = false;
    bool checkpoint = false;
    bool checkpoint_f16 = false;
    int verify_k = 0;  // K of the most recent verify, 0: none since alloc
    bool inter_f16 = false;
  };
  struct Snap {
    bool saved = false;
    bool h_f16 = false;
  };
  int capacity(int slot) const;
  int pick_slot(int min_capacity) const;  // -1: none free with that capacity
  const Seq* find(int seq) const;

  PoolConfig pool_;
  std::map<int, Seq> seqs_;  // logical sequence -> bookkeeping
  std::vector<Snap> snaps_;
};

}  // namespace ssm::fuzz
