// A backend wrapper whose state_digest checks the inner backend's digests against its exports:
// after every digest it exports the slot too, and records a problem when the digest stayed the
// same while the export changed (a skipped comparison would hide a change), or changed while the
// export stayed the same (a digest that is not a function of the export; only wasteful, but a
// sign of reading something else). `extra` may check more (the reference: that its in-place digest
// is the digest of its export). Used by state_digest_test (reference) and property_gpu_test (CUDA).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/state_digest.h"

namespace ssm::test {

// What the wrappers of one campaign (one per case) found, shared between them.
struct DigestCheckLog {
  std::vector<std::string> problems;
  int64_t digests = 0;    // digests taken
  int64_t unchanged = 0;  // a slot's digest retaken over the same export
  int64_t changed = 0;    // ... over another export
};

class DigestChecking : public Backend {
 public:
  using Extra = std::function<void(int slot, uint64_t digest, const SequenceState& exported,
                                   std::vector<std::string>& problems)>;
  DigestChecking(std::unique_ptr<Backend> inner, std::shared_ptr<DigestCheckLog> log, Extra extra = nullptr)
      : inner_(std::move(inner)), log_(std::move(log)), extra_(std::move(extra)) {}
  std::string name() const override { return inner_->name() + "-digest-checked"; }
  void create_pool(const Model& m, const PoolConfig& p) override {
    last_.clear();
    inner_->create_pool(m, p);
  }
  int alloc(int c) override { return inner_->alloc(c); }
  void release(int s) override {
    last_.erase(s);
    inner_->release(s);
  }
  StepOutputs prefill(int s, const StepInputs& in) override { return inner_->prefill(s, in); }
  std::vector<StepOutputs> decode(const std::vector<int>& s, const std::vector<StepInputs>& in) override {
    return inner_->decode(s, in);
  }
  std::vector<StepOutputs> verify(const std::vector<int>& s, int k, VerifyArm a,
                                  const std::vector<StepInputs>& in) override {
    return inner_->verify(s, k, a, in);
  }
  void checkpoint(int s, bool async) override { inner_->checkpoint(s, async); }
  void commit(int s, int n, int k) override { inner_->commit(s, n, k); }
  void rollback(int s, int n, bool c) override { inner_->rollback(s, n, c); }
  void to_f16(int s) override { inner_->to_f16(s); }
  void snapshot_save(int s, int i) override { inner_->snapshot_save(s, i); }
  void snapshot_restore(int s, int i) override { inner_->snapshot_restore(s, i); }
  SequenceState export_state(int s) override { return inner_->export_state(s); }
  bool async_pending(int s) const override { return inner_->async_pending(s); }
  bool pause_async_copies(bool on) override { return inner_->pause_async_copies(on); }

  std::optional<uint64_t> state_digest(int s) override {
    const std::optional<uint64_t> d = inner_->state_digest(s);
    if (!d) {
      log_->problems.push_back(name() + ": the inner backend computes no digest");
      return d;
    }
    ++log_->digests;
    const SequenceState now = inner_->export_state(s);
    const uint64_t exported = ssm::state_digest(now);
    if (extra_) extra_(s, *d, now, log_->problems);
    const auto it = last_.find(s);
    if (it != last_.end()) {
      const bool same_digest = it->second.first == *d, same_export = it->second.second == exported;
      if (same_digest && !same_export)
        log_->problems.push_back("slot " + std::to_string(s) + ": the export changed, the digest did not");
      if (!same_digest && same_export)
        log_->problems.push_back("slot " + std::to_string(s) + ": the digest changed, the export did not");
      log_->unchanged += same_export;
      log_->changed += !same_export;
    }
    last_[s] = {*d, exported};
    return d;
  }
  Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
  std::shared_ptr<DigestCheckLog> log_;
  Extra extra_;
  std::map<int, std::pair<uint64_t, uint64_t>> last_;  // slot: (digest, digest of the export)
};

}  // namespace ssm::test
