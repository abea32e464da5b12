// Reports of unchanged fields (see field_cache.h).
#include "compare/field_cache.h"

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

}  // namespace ssm::cmp
