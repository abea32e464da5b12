// The bookkeeping model of a campaign: which logical sequences are live, in which slots, and
// what the contract allows next. Predicts whether an op is legal and applies its effects on
// the metadata (never on tensors), using the same Contract checks as the backends.
#pragma once
#include <map>
#include <vector>

#include "core/contract.h"
#include "core/op.h"

namespace ssm::fuzz {

class OpModel {
 public:
  OpModel(const ModelSpec& spec, const PoolConfig& pool) : contract_(spec, pool) {}

  // The op names only live sequences (alloc: a sequence that is not live); a shrunk script
  // whose alloc was removed fails this and is skipped.
  bool seqs_ok(const Op& op) const;
  // Applies the op's effects when the contract allows it; returns whether it is legal.
  bool apply(const Op& op);

  std::vector<int> live() const;  // ascending logical sequences
  int slot_of(int seq) const { return seqs_.at(seq); }
  const SlotMeta& meta(int seq) const { return contract_.slot(seqs_.at(seq)); }
  const Contract& contract() const { return contract_; }
  int next_seq() const { return seqs_.empty() ? next_ : std::max(next_, seqs_.rbegin()->first + 1); }

 private:
  Contract contract_;
  std::map<int, int> seqs_;  // logical sequence -> slot
  int next_ = 0;
};

}  // namespace ssm::fuzz
