// The reports of one sequence's fields that passed, keyed by digests of what produced them: a
// field whose reference bits, compared bits and condition are all unchanged since it last passed
// under the same class gets the same report again without the elementwise comparison
// (compare_tensor is a function of those inputs and the tolerances, which a cache's owner keeps
// fixed). The lockstep keeps one per sequence (fuzz/lockstep.h): after a decode, say, the
// checkpoint and the verify's intermediates have not changed, only h and conv are compared again.
// A field is also matched by content: the same bits on both sides, condition and class as any
// field that passed in an earlier comparison give that report, with the field's place and axis
// names (the only parts of a report that depend on the field's name): a checkpoint is a copy of
// h, a commit or a rollback copies an intermediate or the checkpoint into h, on both sides.
// Digests are 64-bit XXH3 (core/state_digest.h): a false match needs a 2^-64 collision.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
    bool operator<(const Key& o) const;
  };
  // The report kept for (layer, tensor) when its key matches, else one of the same key kept by an
  // earlier comparison under any name; with `where` as given (and its axes named for it).
  std::optional<TensorReport> find(int layer, const std::string& tensor, const Key& key, const Where& where);
  // Keeps a passing report (a failing one is dropped: it is compared again). By content it is
  // found from the next comparison on (end_comparison), so that which fields of one comparison
  // reuse which does not depend on the order its threads finish in.
  void keep(int layer, const std::string& tensor, const Key& key, const TensorReport& report);
  // The end of one state's comparison (compare_state): its reports become findable by content.
  void end_comparison();
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
  // by content; at most kMostByContent (then emptied: a bound on memory, never on a result)
  static constexpr size_t kMostByContent = 512;
  std::map<Key, TensorReport> by_content_;
  std::vector<std::pair<Key, TensorReport>> pending_;  // this comparison's, until end_comparison
  int64_t reused_ = 0;
};

}  // namespace ssm::cmp
