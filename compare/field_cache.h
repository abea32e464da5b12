// The reports of one sequence's fields that passed, keyed by digests of what produced them: a
// field whose reference bits, compared bits and condition are all unchanged since it last passed
// under the same class gets the same report again without the elementwise comparison
// (compare_tensor is a function of those inputs and the tolerances, which a cache's owner keeps
// fixed). The lockstep keeps one per sequence (fuzz/lockstep.h): after a decode, say, the
// checkpoint and the verify's intermediates have not changed, only h and conv are compared again.
// Digests are 64-bit XXH3 (core/state_digest.h): a false match needs a 2^-64 collision.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "compare/compare.h"

namespace ssm::cmp {

class FieldCache {
 public:
  // What a field's comparison depends on besides the tolerances (compare_state compares every
  // field with allow_zero_ref, so that is no part of it).
  struct Key {
    uint64_t ref = 0, got = 0, cond = 0;  // tensor_digest of each (cond: 0 when none)
    TolClass cls = TolClass::exact;
    bool operator==(const Key& o) const { return ref == o.ref && got == o.got && cond == o.cond && cls == o.cls; }
  };
  // The report kept for (layer, tensor) when its key matches, with `where` as given.
  std::optional<TensorReport> find(int layer, const std::string& tensor, const Key& key, const Where& where);
  // Keeps a passing report (a failing one is dropped: it is compared again).
  void keep(int layer, const std::string& tensor, const Key& key, const TensorReport& report);
  int64_t reused() const { return reused_; }

  // Digests the caller already has of the tensors about to be compared (a backend's field digests
  // of the exports, fuzz/held_export.h), by address, used for the keys instead of hashing those
  // tensors again; a tensor not listed is hashed (tensor_digest). A side's digests of one field
  // must come from one function over the cache's life (a backend's own, or XXH3), so that equal
  // digests mean equal bits. The addresses must stay valid until know({}, {}).
  using KnownDigests = std::map<const Tensor*, uint64_t>;
  void know(KnownDigests ref, KnownDigests got);
  uint64_t ref_digest(const Tensor& t) const { return digest(known_ref_, t); }
  uint64_t got_digest(const Tensor& t) const { return digest(known_got_, t); }

 private:
  static uint64_t digest(const KnownDigests& known, const Tensor& t);
  KnownDigests known_ref_, known_got_;  // read by the comparing threads, set between comparisons
  std::mutex m_;  // a state's fields are compared on several threads
  std::map<std::pair<int, std::string>, std::pair<Key, TensorReport>> entries_;
  int64_t reused_ = 0;
};

}  // namespace ssm::cmp
