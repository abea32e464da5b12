// The reference driven through a different but equivalent path: the system under test of
// CPU-only campaigns, so the campaign machinery runs in CI. Batches run row by row in reverse
// order, FP32 prefill runs as single decodes, commit runs as rollback, async copies run as
// synchronous ones, and commit rebuilds the PLE history from the pre-verify history and the
// verify's tokens instead of restoring the snapshot's. Bitwise equal to ReferenceBackend.
// Mutant builds switch on its SSM_MUTANT sites (fuzz/mutant_catalogue.cpp, docs/mutants.md).
#pragma once
#include <map>
#include <memory>

#include "reference/reference_backend.h"

namespace ssm::fuzz::alt {

class AltReferenceBackend : public Backend {
 public:
  std::string name() const override;
  void create_pool(const Model& model, const PoolConfig& pool) override { inner_.create_pool(model, pool); }
  int alloc(int min_capacity) override { return inner_.alloc(min_capacity); }
  void release(int slot) override { inner_.release(slot); }
  StepOutputs prefill(int slot, const StepInputs& in) override;
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override;
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override;
  void checkpoint(int slot, bool) override { inner_.checkpoint(slot, false); }
  void commit(int slot, int n, int k) override;
  void rollback(int slot, int n, bool and_checkpoint) override;
  void to_f16(int slot) override { inner_.to_f16(slot); }
  void snapshot_save(int slot, int snap) override { inner_.snapshot_save(slot, snap); }
  void snapshot_restore(int slot, int snap) override { inner_.snapshot_restore(slot, snap); }
  SequenceState export_state(int slot) override { return inner_.export_state(slot); }
  std::optional<FieldDigests> field_digests(int slot) override { return inner_.field_digests(slot); }
  void export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) override {
    inner_.export_update(slot, before, now, state);
  }

 private:
  // What a partial accept needs to rebuild a PLE history: per layer, the history before the
  // slot's last verify and that verify's tokens (empty on layers hosting no carry).
  struct PleVerify {
    std::vector<std::vector<float>> history, tokens;
  };
  void remember_ple_verify(int slot, const StepInputs& in);
  // After the inner rollback to n kept rows: the PLE histories rebuilt (`before`: the live carries
  // before the commit, kept only for the mutant that does not roll them back).
  void restore_ple(int slot, int n, const std::vector<std::optional<PleCarry>>& before);
  ref::ReferenceBackend inner_;
  std::map<int, PleVerify> ple_verify_;
};

std::unique_ptr<Backend> make_alt_backend();

}  // namespace ssm::fuzz::alt
