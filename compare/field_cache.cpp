// Reports of unchanged fields (see field_cache.h).
#include "compare/field_cache.h"

#include <utility>

#include "core/state_digest.h"

namespace ssm::cmp {

std::optional<TensorReport> FieldCache::find(int layer, const std::string& tensor, const Key& key,
                                             const Where& where) {
  std::lock_guard<std::mutex> lock(m_);
  const auto it = entries_.find({layer, tensor});
  if (it == entries_.end() || !(it->second.first == key)) return std::nullopt;
  ++reused_;
  TensorReport r = it->second.second;
  r.where = where;
  return r;
}

void FieldCache::keep(int layer, const std::string& tensor, const Key& key, const TensorReport& report) {
  std::lock_guard<std::mutex> lock(m_);
  if (report.pass) entries_[{layer, tensor}] = {key, report};
  else entries_.erase({layer, tensor});
}

void FieldCache::know(KnownDigests ref, KnownDigests got) {
  known_ref_ = std::move(ref);
  known_got_ = std::move(got);
}

uint64_t FieldCache::digest(const KnownDigests& known, const Tensor& t) {
  const auto it = known.find(&t);
  return it != known.end() ? it->second : tensor_digest(t);
}

}  // namespace ssm::cmp
