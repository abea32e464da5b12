// CudaBackend: forwards each transition to Engine (cuda/engine.h, the engine*.cpp files).
#include "cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include "cuda/device_memory.h"
#include "cuda/engine.h"

namespace ssm::cuda {

CudaBackend::CudaBackend() : e_(std::make_unique<Engine>()) {}
CudaBackend::~CudaBackend() {
  e_.reset();
  device_memory_trim();  // the engine's memory goes back to the driver, not only to the process's pool
}

// Every call that enqueues work makes the schedule current on its thread first (cuda/schedule.h).
#define SSM_SCHEDULED const ScheduleScope scheduled(&schedule_)

void CudaBackend::create_pool(const Model& model, const PoolConfig& pool) {
  schedule_.reset();  // a new case: its launches are planned from the first again
  SSM_SCHEDULED;
  e_->create_pool(model, pool);
}
int CudaBackend::alloc(int min_capacity) {
  SSM_SCHEDULED;
  return e_->alloc(min_capacity);
}
void CudaBackend::release(int slot) {
  SSM_SCHEDULED;
  e_->release(slot);
}
StepOutputs CudaBackend::prefill(int slot, const StepInputs& in) {
  SSM_SCHEDULED;
  return e_->prefill(slot, in);
}
std::vector<StepOutputs> CudaBackend::decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) {
  SSM_SCHEDULED;
  return e_->decode(slots, in);
}
std::vector<StepOutputs> CudaBackend::verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                             const std::vector<StepInputs>& in) {
  SSM_SCHEDULED;
  return e_->verify(slots, k, arm, in);
}
void CudaBackend::checkpoint(int slot, bool async) {
  SSM_SCHEDULED;
  e_->checkpoint(slot, async);
}
void CudaBackend::commit(int slot, int n, int k) {
  SSM_SCHEDULED;
  e_->commit(slot, n, k);
}
void CudaBackend::rollback(int slot, int n, bool and_checkpoint) {
  SSM_SCHEDULED;
  e_->rollback(slot, n, and_checkpoint);
}
void CudaBackend::to_f16(int slot) {
  SSM_SCHEDULED;
  e_->to_f16(slot);
}
void CudaBackend::snapshot_save(int slot, int snap) {
  SSM_SCHEDULED;
  e_->snapshot_save(slot, snap);
}
void CudaBackend::snapshot_restore(int slot, int snap) {
  SSM_SCHEDULED;
  e_->snapshot_restore(slot, snap);
}
SequenceState CudaBackend::export_state(int slot) {
  SSM_SCHEDULED;
  return e_->export_state(slot);
}
std::optional<FieldDigests> CudaBackend::field_digests(int slot) {
  SSM_SCHEDULED;
  return e_->field_digests(slot);
}
void CudaBackend::export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state) {
  SSM_SCHEDULED;
  e_->export_update(slot, before, now, state);
}
const Contract& CudaBackend::contract() const { return e_->contract(); }

std::string CudaBackend::check_guards() { return e_->check_guards(); }
std::vector<uint8_t> CudaBackend::read_family(int layer, PoolFamily f) { return e_->read_family(layer, f); }
size_t CudaBackend::family_pitch(int layer, PoolFamily f) const { return e_->pool().pitch(layer, f); }
size_t CudaBackend::family_offset(int layer, PoolFamily f, int slot, int t) const {
  return e_->pool().offset(layer, f, slot, t);
}
bool CudaBackend::async_pending(int slot) const { return e_->async_pending(slot); }
bool CudaBackend::pause_async_copies(bool on) {
  e_->pause_async_copies(on);
  return true;
}
bool CudaBackend::perturb_schedule(uint64_t seed) {
  schedule_.perturb(seed);
  return true;
}
void CudaBackend::synchronize() { e_->synchronize(); }

bool device_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) {
      // a machine without an NVIDIA driver reports "insufficient driver": say what it means
      const bool none = e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice;
      *why = none ? std::string("no NVIDIA GPU or driver found (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")"
                  : std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" +
                        cudaGetErrorString(e) + ")";
    }
    return false;
  }
  if (n == 0) {
    if (why) *why = "no NVIDIA GPU found (cudaGetDeviceCount reports 0 devices)";
    return false;
  }
  return true;
}

}  // namespace ssm::cuda
