// The transitions that copy state (alloc's zero-fill, checkpoint, commit, rollback, snapshots),
// the copy lists they run (one batched launch each, cuda/copies.h), and asynchronous copies:
// their ordering on the copy stream, per-slot events and the pauses of the test hook
// pause_async_copies.
#include "core/mutant.h"
#include "cuda/check.h"
#include "cuda/engine.h"

namespace ssm::cuda {

// ---- async ordering and pauses ----------------------------------------------------------------

void Engine::pause_async_copies(bool on) {
  if (on && !released_) {
    SSM_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&released_), sizeof(unsigned long long), cudaHostAllocMapped));
    *released_ = issued_;
    SSM_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&released_dev_), released_, 0));
  }
  if (!on) release_until(issued_);
  pause_ = on;
}

void Engine::release_until(unsigned long long ticket) {
  if (!released_) return;
  volatile unsigned long long* r = released_;
  if (*r < ticket) *r = ticket;
}

void Engine::synchronize() {
  release_until(issued_);
  SSM_CUDA(cudaStreamSynchronize(main_));
  SSM_CUDA(cudaStreamSynchronize(copy_));
}

void Engine::run_async(int slot, const std::vector<CopyDesc>& list) {
  SSM_CUDA(cudaEventRecord(main_done_, main_));  // the copies read what main wrote so far
  SSM_CUDA(cudaStreamWaitEvent(copy_, main_done_, 0));
  ticket_[size_t(slot)] = ++issued_;
  if (pause_) launch_wait_released(released_dev_, issued_, copy_);
  launch_copies(list, copy_);
  SSM_CUDA(cudaEventRecord(slot_ready_[size_t(slot)], copy_));
  pending_[size_t(slot)] = true;
}

void Engine::wait_async(int slot) {
  if (!pending_[size_t(slot)]) return;
  release_until(ticket_[size_t(slot)]);  // a paused copy runs now that its reader waits for it
  SSM_CUDA(cudaStreamWaitEvent(main_, slot_ready_[size_t(slot)], 0));
  pending_[size_t(slot)] = false;
}

// ---- slots and copies -------------------------------------------------------------------------

int Engine::alloc(int min_capacity) {
  const int slot = contract_.check_alloc(min_capacity);
  wait_async(slot);
  const PoolConfig& cfg = contract_.pool();
  std::vector<CopyDesc> zero;
  for (int l = 0; l < pool_.layers(); ++l) {
    const LayerPool& lp = pool_.layer(l);
    if (!SSM_MUTANT("cuda_alloc_no_zero"))
      zero.push_back({nullptr, pool_.h(l, slot), lp.h_pitch});  // mutant (class 11)
    zero.push_back({nullptr, pool_.conv(l, slot), lp.conv_pitch});
    zero.push_back({nullptr, pool_.h_checkpoint(l, slot), lp.h_pitch});
    zero.push_back({nullptr, pool_.conv_checkpoint(l, slot), lp.conv_pitch});
    if (cfg.capacity(slot) > 0)
      zero.push_back({nullptr, pool_.h_intermediate(l, slot, 0), lp.h_pitch * size_t(cfg.capacity(slot))});
    if (cfg.conv_capacity > 0)
      zero.push_back({nullptr, pool_.conv_intermediate(l, slot, 0), lp.conv_pitch * size_t(cfg.conv_capacity)});
  }
  if (cfg.h_mode == HMode::f16_pool) zero.push_back({nullptr, pool_.stage(slot), pool_.stage_pitch()});
  launch_copies(zero, main_);
  contract_.on_alloc(slot);
  ple_live_[size_t(slot)] = ple_checkpoint_[size_t(slot)] = 0;  // absent until the first row
  return slot;
}

void Engine::release(int slot) {
  contract_.check_claimed("release", slot);
  contract_.on_release(slot);  // the bytes stay until the next alloc zeroes them
}

std::vector<CopyDesc> Engine::checkpoint_copies(int slot) const {
  const DType d = contract_.slot(slot).h_dtype();
  std::vector<CopyDesc> v;
  for (int l = 0; l < pool_.layers(); ++l) {
    v.push_back({pool_.h(l, slot), pool_.h_checkpoint(l, slot), h_bytes(l, d)});
    // mutant (bug class 8): the conv copy sized zero
    v.push_back({pool_.conv(l, slot), pool_.conv_checkpoint(l, slot),
                 SSM_MUTANT("cuda_checkpoint_conv_zero_bytes") ? 0 : pool_.layer(l).conv_pitch});
  }
  ple_checkpoint_copies(slot, v);
  return v;
}

std::vector<CopyDesc> Engine::restore_copies(int slot, int n) const {
  const SlotMeta& m = contract_.slot(slot);
  const DType d = m.h_dtype();
  const int t = SSM_MUTANT("cuda_restore_off_by_one") ? n : n - 1;  // mutant (bug class 2)
  std::vector<CopyDesc> v;
  for (int l = 0; l < pool_.layers(); ++l) {
    const size_t cb = pool_.layer(l).conv_pitch;
    if (n == 0) {
      if (m.has_h_checkpoint) v.push_back({pool_.h_checkpoint(l, slot), pool_.h(l, slot), h_bytes(l, d)});
      if (m.has_conv_checkpoint) v.push_back({pool_.conv_checkpoint(l, slot), pool_.conv(l, slot), cb});
    } else {
      v.push_back({pool_.h_intermediate(l, slot, t), pool_.h(l, slot), h_bytes(l, d)});
      v.push_back({pool_.conv_intermediate(l, slot, t), pool_.conv(l, slot), cb});
    }
  }
  ple_restore_copies(slot, n == 0 ? 0 : t + 1, false, v);
  return v;
}

void Engine::checkpoint(int slot, bool async) {
  contract_.check_claimed(async ? "checkpoint_async" : "checkpoint", slot);
  const std::vector<CopyDesc> list = checkpoint_copies(slot);
  if (async) {
    run_async(slot, list);
  } else {
    wait_async(slot);
    launch_copies(list, main_);
  }
  contract_.on_checkpoint(slot);
  ple_checkpoint_[size_t(slot)] = ple_live_[size_t(slot)];
}

void Engine::commit(int slot, int n, int k) {
  contract_.check_commit(slot, n, k);
  if (n == k && !SSM_MUTANT("cuda_commit_reads_last_intermediate")) return;  // mutant (bug class 17)
  wait_async(slot);
  launch_copies(restore_copies(slot, n), main_);
  ple_after_restore(slot, n);
}

void Engine::rollback(int slot, int n, bool and_checkpoint) {
  if (SSM_MUTANT("cuda_rollback_partial_on_error") && pool_.layers() > 1 && n >= 1 && contract_.slot(slot).claimed &&
      n - 1 < contract_.pool().capacity(slot) && n - 1 < contract_.pool().conv_capacity) {
    // mutant (bug class 12): layer 0 restored before the op is checked
    std::vector<CopyDesc> first = restore_copies(slot, n);
    first.resize(2);
    wait_async(slot);
    launch_copies(first, main_);
  }
  contract_.check_rollback(and_checkpoint ? OpKind::rollback_and_checkpoint_async : OpKind::rollback, slot, n);
  std::vector<CopyDesc> list = restore_copies(slot, n);
  if (!and_checkpoint) {
    if (!SSM_MUTANT("cuda_async_reader_no_wait")) wait_async(slot);  // mutant (bug class 14)
    launch_copies(list, main_);
    ple_after_restore(slot, n);
    return;
  }
  // checkpoint <- the rolled-back state, copied from the same sources in the same launch
  const SlotMeta& m = contract_.slot(slot);
  const DType d = m.h_dtype();
  for (int l = 0; l < pool_.layers(); ++l) {
    const size_t cb = pool_.layer(l).conv_pitch;
    if (n == 0) {  // a present checkpoint is already the rolled-back state; an absent one takes live
      if (!m.has_h_checkpoint) list.push_back({pool_.h(l, slot), pool_.h_checkpoint(l, slot), h_bytes(l, d)});
      if (!m.has_conv_checkpoint) list.push_back({pool_.conv(l, slot), pool_.conv_checkpoint(l, slot), cb});
    } else {
      list.push_back({pool_.h_intermediate(l, slot, n - 1), pool_.h_checkpoint(l, slot), h_bytes(l, d)});
      list.push_back({pool_.conv_intermediate(l, slot, n - 1), pool_.conv_checkpoint(l, slot), cb});
    }
  }
  if (n >= 1) {
    ple_restore_copies(slot, n, true, list);
  } else if (!m.has_conv_checkpoint) {  // the checkpoint takes the live carry, as it takes live h and conv
    ple_checkpoint_copies(slot, list);
  }
  run_async(slot, list);
  ple_after_restore(slot, n);
  if (n >= 1 || !m.has_conv_checkpoint) ple_checkpoint_[size_t(slot)] = ple_live_[size_t(slot)];
  contract_.on_checkpoint(slot);
}

// The copies between slot's live state and snapshot snap, towards the snapshot or from it; the
// PLE carry's only when `ple` (a layer hosting none has nothing to copy).
std::vector<CopyDesc> Engine::snapshot_copies(int slot, int snap, bool to_snapshot, bool ple) const {
  const DType d = contract_.slot(slot).h_dtype();
  std::vector<CopyDesc> v;
  const auto add = [&](void* live, void* saved, size_t bytes) {
    v.push_back(to_snapshot ? CopyDesc{live, saved, bytes} : CopyDesc{saved, live, bytes});
  };
  for (int l = 0; l < pool_.layers(); ++l) {
    add(pool_.h(l, slot), pool_.snapshot_h(l, snap), h_bytes(l, d));
    add(pool_.conv(l, slot), pool_.snapshot_conv(l, snap), pool_.layer(l).conv_pitch);
    if (ple && model_.spec.layers[size_t(l)].ple.hosted()) {
      const LayerPool& lp = pool_.layer(l);
      add(pool_.ple_history(l, slot), pool_.snapshot_ple_history(l, snap), lp.ple_history_pitch);
      add(pool_.ple_conv(l, slot), pool_.snapshot_ple_conv(l, snap), lp.ple_conv_pitch);
    }
  }
  return v;
}

void Engine::snapshot_save(int slot, int snap) {
  contract_.check_snapshot(OpKind::snapshot_save, slot, snap);
  wait_async(slot);
  launch_copies(snapshot_copies(slot, snap, true, true), main_);
  contract_.on_snapshot_save(slot, snap);
  ple_saved_[size_t(snap)] = ple_live_[size_t(slot)];
}

void Engine::snapshot_restore(int slot, int snap) {
  contract_.check_snapshot(OpKind::snapshot_restore, slot, snap);
  wait_async(slot);
  launch_copies(snapshot_copies(slot, snap, false, ple_saved_[size_t(snap)]), main_);
  ple_live_[size_t(slot)] = ple_saved_[size_t(snap)];
}

}  // namespace ssm::cuda
