// The CUDA Backend: every GDN transition of STATE-MODEL sections 4-6 on a device pool.
// Plain C++ (no CUDA types), so g++ builds the CLI against it; the device side is Engine
// (cuda/engine.h). Counterpart: reference/reference_backend.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/contract.h"
#include "cuda/pool_family.h"
#include "cuda/schedule.h"

namespace ssm::cuda {

class Engine;

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  std::string numerics_id() const override;  // the kernels' digest and the device (cuda/numerics_id.cpp)
  void create_pool(const Model& model, const PoolConfig& pool) override;
  int alloc(int min_capacity) override;
  void release(int slot) override;
  StepOutputs prefill(int slot, const StepInputs& in) override;
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override;
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override;
  void checkpoint(int slot, bool async) override;
  void commit(int slot, int n, int k) override;
  void rollback(int slot, int n, bool and_checkpoint) override;
  void to_f16(int slot) override;
  void snapshot_save(int slot, int snap) override;
  void snapshot_restore(int slot, int snap) override;
  SequenceState export_state(int slot) override;
  void import_state(int slot, const SequenceState& state) override;  // cuda/import_state.cpp
  std::optional<FieldDigests> field_digests(int slot) override;  // on the device (Engine::field_digests)
  void export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) override;

  const Contract& contract() const;

  // Test hooks. Each waits for the device first.
  std::string check_guards();  // "" when every guard band of every device allocation is intact
  // Bytes of one layer's allocation of a family (guards excluded; stage ignores the layer).
  std::vector<uint8_t> read_family(int layer, PoolFamily f);
  size_t family_pitch(int layer, PoolFamily f) const;                        // bytes per slot / entry
  size_t family_offset(int layer, PoolFamily f, int slot, int t = 0) const;  // slot's bytes in the family
  bool async_pending(int slot) const override;
  bool pause_async_copies(bool on) override;
  bool perturb_schedule(uint64_t seed) override;  // cuda/schedule.h
  void synchronize();
  Engine& engine() { return *e_; }

 private:
  std::unique_ptr<Engine> e_;
  Schedule schedule_;  // perturbed launches: current on the calling thread during each call (ScheduleScope)
};

// True when a CUDA device is usable; otherwise *why says what failed.
bool device_available(std::string* why);

}  // namespace ssm::cuda
