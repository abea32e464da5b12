// Reports of unchanged fields (see field_cache.h).
#include "compare/field_cache.h"

#include <tuple>
#include <utility>

#include "core/state_digest.h"

namespace ssm::cmp {

bool FieldCache::Key::operator<(const Key& o) const {
  return std::make_tuple(ref, got, cond, int(cls)) < std::make_tuple(o.ref, o.got, o.cond, int(o.cls));
}

std::optional<TensorReport> FieldCache::find(int layer, const std::string& tensor, const Key& key,
                                             const Where& where) {
  std::lock_guard<std::mutex> lock(m_);
  TensorReport r;
  const auto it = entries_.find({layer, tensor});
  if (it != entries_.end() && it->second.first == key) {
    r = it->second.second;
  } else {
    const auto c = by_content_.find(key);
    if (c == by_content_.end()) return std::nullopt;
    r = c->second;
    r.axes = axis_names(where.tensor, r.axes.size());
  }
  ++reused_;
  r.where = where;
  return r;
}

void FieldCache::keep(int layer, const std::string& tensor, const Key& key, const TensorReport& report) {
  std::lock_guard<std::mutex> lock(m_);
  if (report.pass) {
    entries_[{layer, tensor}] = {key, report};
    pending_.emplace_back(key, report);
  } else {
    entries_.erase({layer, tensor});
  }
}

void FieldCache::end_comparison() {
  std::lock_guard<std::mutex> lock(m_);
  if (by_content_.size() + pending_.size() > kMostByContent) by_content_.clear();
  for (auto& [key, report] : pending_) by_content_.emplace(key, std::move(report));
  pending_.clear();
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
