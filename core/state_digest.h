// 64-bit digests of exported state (XXH3, xxhash's header-only build): the lockstep compares a
// sequence again only when one side's digest changed since its last passing comparison
// (fuzz/lockstep.cpp), so an op pays for the sequences it touched, not for every live one.
// A digest covers every byte compare_state reads: flags, counts, presence, dtypes, shapes, the
// values and the conditions. Two different states share a digest with probability 2^-64.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/state.h"
#include "core/tensor.h"

namespace ssm {

// Feeds values in order into one XXH3-64 state; the order is part of the digest.
class StateHasher {
 public:
  StateHasher();
  ~StateHasher();
  StateHasher(const StateHasher&) = delete;
  StateHasher& operator=(const StateHasher&) = delete;

  void add(int64_t v);
  void add(const std::string& s);            // length, then the bytes
  void add(const Tensor& t);                 // dtype, shape and bits
  void add(const std::optional<Tensor>& t);  // presence, then the tensor
  void add_optional(const Tensor* t);        // the same, null when absent (no copy to make)
  void add(const std::vector<Tensor>& v);    // count, then each
  uint64_t digest() const;

 private:
  void bytes(const void* p, size_t n);
  struct State;
  std::unique_ptr<State> s_;
};

// The digest of an exported state (every field of SequenceState but the slot index): the combined
// digest of its field digests (core/state_fields.h).
uint64_t state_digest(const SequenceState& s);
// The digest of one tensor (dtype, shape and bits).
uint64_t tensor_digest(const Tensor& t);

}  // namespace ssm
