// A backend wrapper that checks the inner backend's field digests against its exports: after every
// field_digests it exports the slot too, and records a problem when the digests name other fields
// than the export has, when the combined digest stayed the same while the export changed (a
// skipped comparison would hide a change) or changed while the export stayed the same (a digest
// that is not a function of the export; only wasteful, but a sign of reading something else), and
// when one field's digest stayed the same while its bits changed (export_update would keep a stale
// field). Every export_update is checked against a fresh export_state, bit for bit. `extra` may
// check more (the reference: that its in-place digests are those of its export). Used by
// state_digest_test (reference) and property_gpu_test (CUDA).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/state_digest.h"
#include "core/state_fields.h"

namespace ssm::test {

// What the wrappers of one campaign (one per case) found, shared between them.
struct DigestCheckLog {
  std::vector<std::string> problems;
  int64_t digests = 0;    // digests taken
  int64_t unchanged = 0;  // a slot's digest retaken over the same export
  int64_t changed = 0;    // ... over another export
  int64_t updates = 0;      // export_update calls
  int64_t fields_kept = 0;  // fields they were told were unchanged
};

class DigestChecking : public Backend {
 public:
  using Extra = std::function<void(int slot, const FieldDigests& digests, const SequenceState& exported,
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

  std::optional<FieldDigests> field_digests(int s) override {
    const std::optional<FieldDigests> d = inner_->field_digests(s);
    if (!d) {
      log_->problems.push_back(name() + ": the inner backend computes no digests");
      return d;
    }
    ++log_->digests;
    Last now;
    now.digests = *d;
    now.state = inner_->export_state(s);
    now.exported = ssm::field_digests(now.state);
    const std::string where = "slot " + std::to_string(s);
    if (extra_) extra_(s, *d, now.state, log_->problems);
    if (keys(*d) != keys(now.exported))
      log_->problems.push_back(where + ": the digests name other fields than the export has");
    const auto it = last_.find(s);
    if (it != last_.end()) {
      const Last& was = it->second;
      const bool same_digest = combined_digest(was.digests) == combined_digest(*d);
      const bool same_export = ssm::state_digest(was.state) == ssm::state_digest(now.state);
      if (same_digest && !same_export) log_->problems.push_back(where + ": the export changed, the digest did not");
      if (!same_digest && same_export) log_->problems.push_back(where + ": the digest changed, the export did not");
      log_->unchanged += same_export;
      log_->changed += !same_export;
      // field by field: a field whose digest stayed the same must have kept its bits (export_update
      // keeps it without reading it)
      for (const FieldDigest& f : *d)
        if (digest_of(was.digests, f.key) == f.digest && digest_of(was.exported, f.key) != digest_of(now.exported, f.key))
          log_->problems.push_back(where + ": a field changed (kind " + std::to_string(int(f.key.kind)) + ", layer " +
                                   std::to_string(f.key.layer) + ", index " + std::to_string(f.key.index) +
                                   "), its digest did not");
    }
    last_[s] = std::move(now);
    return d;
  }
  // The inner update must give export_state's state, bit for bit; counts the fields it kept.
  void export_update(int s, const FieldDigests& before, const FieldDigests& now, SequenceState& state) override {
    for (const FieldDigest& f : now) log_->fields_kept += f.key.kind != FieldKind::rest && digest_of(before, f.key) == f.digest;
    ++log_->updates;
    inner_->export_update(s, before, now, state);
    if (ssm::state_digest(state) != ssm::state_digest(inner_->export_state(s)))
      log_->problems.push_back("slot " + std::to_string(s) + ": export_update gave another state than export_state");
  }
  Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<Backend> inner_;
  std::shared_ptr<DigestCheckLog> log_;
  Extra extra_;
  struct Last {
    FieldDigests digests;   // the inner backend's
    SequenceState state;    // its export then
    FieldDigests exported;  // field_digests of that export
  };
  std::map<int, Last> last_;  // per slot
  static std::vector<FieldKey> keys(const FieldDigests& d) {
    std::vector<FieldKey> k;
    for (const FieldDigest& f : d) k.push_back(f.key);
    return k;
  }
  static std::optional<uint64_t> digest_of(const FieldDigests& d, const FieldKey& k) {
    for (const FieldDigest& f : d)
      if (f.key == k) return f.digest;
    return std::nullopt;
  }
};

}  // namespace ssm::test
