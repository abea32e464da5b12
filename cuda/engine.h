// The CUDA implementation behind CudaBackend: the device pool, two streams (main, copy), the
// per-slot events of async copies, input/output staging, and the op sequencing of every
// transition. Each op runs its Contract checks first, so an op that fails launches nothing.
// Internal (CUDA runtime types): included by cuda/*.cpp and the benchmark, never by the CLI.
// Defined in cuda/engine.cpp and, one concern each, cuda/engine_{inputs,launch,ple,copies,export}.cpp.
#pragma once
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "core/contract.h"
#include "core/model.h"
#include "core/op.h"
#include "core/state.h"
#include "core/state_fields.h"
#include "cuda/copies.h"
#include "cuda/pinned_buffer.h"
#include "cuda/pool.h"
#include "cuda/stream.h"

namespace ssm::cuda {

class Engine {
 public:
  Engine();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The transitions (core/backend.h).
  void create_pool(const Model& model, const PoolConfig& pool);
  int alloc(int min_capacity);
  void release(int slot);
  StepOutputs prefill(int slot, const StepInputs& in);
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in);
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in);
  void checkpoint(int slot, bool async);
  void commit(int slot, int n, int k);
  void rollback(int slot, int n, bool and_checkpoint);
  void to_f16(int slot);
  void snapshot_save(int slot, int snap);
  void snapshot_restore(int slot, int snap);
  SequenceState export_state(int slot);
  void import_state(int slot, const SequenceState& state);  // cuda/import_state.cpp
  // The digest of each field of what export_state(slot) would return, computed on the device
  // (cuda/region_digest.h) and combined on the host with the field's key, dtype and shape (`rest`:
  // the export's scalars): only 8 bytes per field come back. Comparable with earlier digests of
  // this engine's same slot only.
  FieldDigests field_digests(int slot);
  // export_state(slot) into `state`, reading back only the fields whose digests changed
  // (Backend::export_update).
  void export_update(int slot, const FieldDigests& before, const FieldDigests& now, SequenceState& state);

  // Building blocks without checks or host syncs (the benchmark captures them in graphs).
  // Copies inputs of B rows (pool slots, the dummy for padding) to the device on the main stream;
  // row b reads in[b % in.size()] (the benchmark repeats a few input sets over many rows).
  void stage_inputs(const std::vector<int>& pool_slots, const std::vector<StepInputs>& in, int rows);
  // conv + gates and the delta rule of every layer on the staged inputs.
  void enqueue_rows(int rows, int n_inter, VerifyArm arm, bool h_f16);
  std::vector<CopyDesc> checkpoint_copies(int slot) const;        // live -> checkpoint
  std::vector<CopyDesc> restore_copies(int slot, int n) const;    // rollback / commit
  void enqueue_copies(const std::vector<CopyDesc>& list) { launch_copies(list, main_); }

  const DevicePool& pool() const { return pool_; }
  const Contract& contract() const { return contract_; }
  const Model& model() const { return model_; }
  cudaStream_t main_stream() const { return main_; }
  std::string check_guards();  // "" when every guard band is intact
  std::vector<uint8_t> read_family(int layer, PoolFamily f);
  bool async_pending(int slot) const { return pending_.at(size_t(slot)); }
  // Test hook (issue: races exposed): while on, every async copy waits on the device until its
  // reader calls wait_async, so a reader that skips the wait reads the stale bytes every time,
  // not only when the copy stream happens to be slow (docs/fuzzing.md, "Paused async copies").
  void pause_async_copies(bool on);
  void synchronize();  // releases paused copies, then waits for both streams

 private:
  std::vector<StepOutputs> run_batch(OpKind op, const std::vector<int>& slots, int k, VerifyArm arm,
                                     const std::vector<StepInputs>& in);
  void enqueue_layer(int l, int rows, int n_inter, VerifyArm arm, bool h_f16, char* h, size_t h_pitch);
  std::vector<StepOutputs> download_outputs(int rows);
  void convert_to_f16(int slot);
  void run_async(int slot, const std::vector<CopyDesc>& list);
  void wait_async(int slot);
  void reserve(DeviceBuffer& buf, size_t bytes, const char* name);
  void reserve_host(size_t in_bytes, size_t out_bytes);
  size_t h_bytes(int l, DType d) const;
  std::vector<CopyDesc> snapshot_copies(int slot, int snap, bool to_snapshot, bool ple) const;

  // The PLE carry (docs/cuda.md "PLE carry"). Its presence is per slot (every op applies to every
  // layer): live, the checkpoint's copy, each snapshot slot's copy.
  std::vector<uint8_t> ple_live_, ple_checkpoint_, ple_saved_;
  int ple_snaps_ = 0;  // verify snapshots the next enqueue_rows writes (K of a verify, else 0)
  bool h_widened_ = false;  // a prefill's widen wrote H right before the conv kernel: launch it plainly
  // A fresh carry (EOS history, zero conv) for each of `pool_slots` whose carry is absent: created
  // on first use. Marks them present.
  std::vector<CopyDesc> ple_fresh_copies(const std::vector<int>& pool_slots);
  // Live PLE carry <- the state after n kept rows (n >= 1: conv snapshot n, history rebuilt from the
  // verify's ids) or the checkpoint's (n == 0), into `dst` (live or checkpoint).
  void ple_restore_copies(int slot, int n, bool to_checkpoint, std::vector<CopyDesc>& v) const;
  void ple_launch_rows(int l, int rows);
  void ple_checkpoint_copies(int slot, std::vector<CopyDesc>& v) const;  // live carry -> checkpoint
  void ple_after_restore(int slot, int n);  // the live carry's presence after a restore of n rows

  Stream main_, copy_;  // first: every buffer below is freed in main_'s order
  Model model_;
  Contract contract_;
  DevicePool pool_;
  cudaEvent_t main_done_ = nullptr;     // recorded on main before an async copy starts
  std::vector<cudaEvent_t> slot_ready_;  // per slot: its last async copy finished
  std::vector<bool> pending_;            // per slot: the next reader must wait on slot_ready_
  // Paused async copies: tickets in issue order; a copy runs once *released_ >= its ticket.
  bool pause_ = false;
  unsigned long long* released_ = nullptr;  // host-mapped pinned counter
  unsigned long long* released_dev_ = nullptr;
  unsigned long long issued_ = 0;
  std::vector<unsigned long long> ticket_;  // per slot: ticket of its pending async copy
  void release_until(unsigned long long ticket);

  // Staged batch: B rows, per-layer offsets (floats) of the kind's inputs (LayerSpec::inputs(),
  // in order) in io_ and of out in out_.
  int batch_ = 0;
  struct LayerIo {
    std::vector<size_t> in;
    size_t out = 0;
    size_t ple_out = 0;  // a layer hosting a PLE carry: its [B][R][C] outputs
  };
  const float* staged(int l, std::vector<float> LayerRows::*member) const;  // null: the kind has no such input
  std::vector<LayerIo> io_off_;
  DeviceBuffer io_, out_, qkv_, gb_, o_, convert_;  // scratch (not pool state)
  // every buffer besides the pool's, readback_ and digests_ included: check_guards reads their
  // bands, readback_bytes makes room for them
  std::vector<const DeviceBuffer*> scratch_buffers() const;
  // Reading back (export_state, check_guards): the pieces are gathered on the device by one batched
  // copy into readback_, then brought over in one copy to pinned host_readback_ (instead of one
  // synchronous cudaMemcpy per field and guard band). Sized once per pool for the largest read
  // (readback_bytes). The device buffer is allocated at the first read (an allocation never
  // synchronises, so paused async copies stay paused; a free would wait for them); the pinned
  // host buffer is sized by create_pool and kept across pools while it is large enough.
  DeviceBuffer readback_;
  PinnedBuffer host_readback_;  // kept across create_pool, >= readback_bytes() of the pool
  size_t readback_bytes() const;
  struct Readback {
    const void* src;  // device
    void* dst;        // host
    size_t bytes;
  };
  // Runs the reads (on main, after everything enqueued there) and waits for them.
  void read_back(const std::vector<Readback>& reads);
  // The fields export_state reads, in export order (core/state_fields.h).
  struct ExportField {
    FieldKey key;
    DType dtype;
    std::vector<int64_t> shape;
    const void* src;  // device
  };
  std::vector<ExportField> export_fields(int slot) const;
  size_t export_fields_most() const;  // the most fields an export of this pool can have
  // The export without its tensor fields (its scalars), as export_state and field_digests see it.
  SequenceState export_rest(int slot) const;
  // An export whose fields unchanged since `previous` (digests `before` then, `now` now) move over
  // from it and whose other fields are read back (export_state: no previous, every field read).
  SequenceState export_from(int slot, SequenceState& previous, const FieldDigests& before, const FieldDigests& now);
  DeviceBuffer digests_;       // field_digests' per-field digests (device, export_fields_most of them)
  PinnedBuffer host_digests_;  // their pinned copy, kept across create_pool
  int sm_count_ = 0;
  PinnedBuffer host_in_, host_out_;  // staging of the inputs and outputs of the row-consuming ops
};

}  // namespace ssm::cuda
