// CUDA import of a recorded state into a free slot (Backend::import_state): the start of a replay
// from a recorded state (replay/start_point.h). Every field the export reads (Engine::export_fields,
// for the slot's new metadata) is written from the host; the slot's other bytes are never read
// before the contract has them written. Counterparts: cuda/engine_copies.cpp (alloc),
// cuda/engine_export.cpp (export_state), reference/import_state.cpp.
#include <cuda_runtime_api.h>

#include <stdexcept>

#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "cuda/engine.h"

namespace ssm::cuda {

void Engine::import_state(int slot, const SequenceState& state) {
  const SlotMeta meta = contract_.check_import(slot, state);
  if (model_.spec.hosts_ple())
    throw std::invalid_argument(
        "cuda: importing the state of a model hosting a PLE carry is not implemented (its "
        "history lives as token ids on the device): replay it from op 0");
  wait_async(slot);
  contract_.on_import(slot, meta);
  ple_live_[size_t(slot)] = ple_checkpoint_[size_t(slot)] = 0;
  SequenceState st = state;  // field_tensor takes a mutable state
  for (const ExportField& f : export_fields(slot)) {
    if (f.key.kind == FieldKind::stage && !st.h_prefill_stage) {  // absent: zero, as alloc leaves it
      size_t bytes = dtype_size(f.dtype);
      for (int64_t d : f.shape) bytes *= size_t(d);
      SSM_CUDA(cudaMemsetAsync(const_cast<void*>(f.src), 0, bytes, main_));
      continue;
    }
    const Tensor& t = field_tensor(st, f.key);
    if (t.dtype() != f.dtype || t.shape() != f.shape)
      throw std::invalid_argument("cuda: import into slot " + std::to_string(slot) +
                                  ": a field's dtype or shape does "
                                  "not match the pool");
    SSM_CUDA(cudaMemcpyAsync(const_cast<void*>(f.src), t.raw(), t.bytes(), cudaMemcpyHostToDevice, main_));
  }
  SSM_CUDA(cudaStreamSynchronize(main_));  // the host tensors are freed on return
}

void CudaBackend::import_state(int slot, const SequenceState& state) {
  const ScheduleScope scheduled(&schedule_);  // as every call that enqueues work (cuda_backend.cpp)
  e_->import_state(slot, state);
}

}  // namespace ssm::cuda
