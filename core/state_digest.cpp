// Digests of exported state (see state_digest.h).
#include "core/state_digest.h"

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

void StateHasher::add(const PleCarry& c) {
  add(c.history);
  add(c.conv);
}

void StateHasher::add(const std::optional<PleCarry>& c) { add_optional(c ? &*c : nullptr); }

void StateHasher::add_optional(const PleCarry* c) {
  add(int64_t(c != nullptr));
  if (c) add(*c);
}

uint64_t StateHasher::digest() const { return XXH3_64bits_digest(&s_->x); }

uint64_t tensor_digest(const Tensor& t) {
  StateHasher h;
  h.add(t);
  return h.digest();
}

uint64_t state_digest(const SequenceState& s) {
  StateHasher h;
  h.add(int64_t(s.last_verify_k));
  h.add(int64_t(s.layers.size()));
  for (const LayerState& l : s.layers) {
    h.add(l.h);
    h.add(l.conv);
    h.add(l.h_checkpoint);
    h.add(l.conv_checkpoint);
    h.add(l.h_intermediates);
    h.add(l.conv_intermediates);
    h.add(int64_t(l.h_is_f16));
    h.add(l.condition.h);
    h.add(l.condition.h_checkpoint);
    h.add(l.condition.h_intermediates);
    h.add(int64_t(l.conv_oldest_column_absent));
    h.add(l.ple);
    h.add(l.ple_checkpoint);
    h.add(int64_t(l.ple_snapshots.size()));
    for (const PleCarry& c : l.ple_snapshots) h.add(c);
  }
  h.add(s.h_prefill_stage);
  h.add(s.h_prefill_stage_condition);
  h.add(int64_t(s.prefill_stage_absent));
  return h.digest();
}

}  // namespace ssm
