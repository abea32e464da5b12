// Digests of exported state (see state_digest.h).
#include "core/state_digest.h"

#include "core/state_fields.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ssm {

struct StateHasher::State {
  XXH3_state_t x;
};

StateHasher::StateHasher() : s_(std::make_unique<State>()) { XXH3_64bits_reset(&s_->x); }
StateHasher::~StateHasher() = default;

void StateHasher::bytes(const void* p, size_t n) {
  if (n) XXH3_64bits_update(&s_->x, p, n);
}

void StateHasher::add(int64_t v) { bytes(&v, sizeof v); }

void StateHasher::add(const std::string& s) {
  add(int64_t(s.size()));
  bytes(s.data(), s.size());
}

void StateHasher::add(const Tensor& t) {
  add(int64_t(t.dtype()));
  add(int64_t(t.shape().size()));
  for (int64_t d : t.shape()) add(d);
  bytes(t.raw(), t.bytes());
}

void StateHasher::add(const std::optional<Tensor>& t) { add_optional(t ? &*t : nullptr); }

void StateHasher::add_optional(const Tensor* t) {
  add(int64_t(t != nullptr));
  if (t) add(*t);
}

void StateHasher::add(const std::vector<Tensor>& v) {
  add(int64_t(v.size()));
  for (const Tensor& t : v) add(t);
}

uint64_t StateHasher::digest() const { return XXH3_64bits_digest(&s_->x); }

uint64_t tensor_digest(const Tensor& t) {
  StateHasher h;
  h.add(t);
  return h.digest();
}

uint64_t state_digest(const SequenceState& s) { return combined_digest(field_digests(s)); }

}  // namespace ssm
