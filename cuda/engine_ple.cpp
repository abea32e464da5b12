// The PLE carry of a layer hosting one (docs/cuda.md "PLE carry"): its rows' launch, its fresh
// copies on first use, its copies at checkpoint and restore, and its presence per slot (live,
// checkpoint, each snapshot slot) as the ops move it.
#include <algorithm>

#include "core/mutant.h"
#include "cuda/engine.h"
#include "cuda/ple_rows.h"

namespace ssm::cuda {

void Engine::ple_launch_rows(int l, int rows) {
  const LayerSpec& s = model_.spec.layers[size_t(l)];
  const LayerPool& lp = pool_.layer(l);
  PleRowsParams p{};
  p.slots = reinterpret_cast<const int*>(io_.get());
  p.conv = reinterpret_cast<float*>(lp.ple_conv.get());
  p.snap = reinterpret_cast<float*>(lp.ple_snapshot_conv.get());
  p.snaps = lp.ple_snaps;
  p.n_snap = ple_snaps_;
  p.history = reinterpret_cast<float*>(lp.ple_history.get());
  p.ids = reinterpret_cast<float*>(lp.ple_ids.get());
  p.x = staged(l, &LayerRows::ple_x);
  p.tokens = staged(l, &LayerRows::ple_tokens);
  p.w = reinterpret_cast<const float*>(lp.ple_w.get());
  p.out = reinterpret_cast<float*>(out_.get()) + io_off_[size_t(l)].ple_out;
  p.B = batch_;
  p.R = rows;
  p.C = s.ple.channels;
  p.conv_rows = s.ple.conv_rows();
  p.K = s.ple.k_size;
  p.dilation = s.ple.dilation;
  p.H = s.ple.history_len();
  launch_ple_rows(p, main_);
}

std::vector<CopyDesc> Engine::ple_fresh_copies(const std::vector<int>& pool_slots) {
  std::vector<CopyDesc> v;
  if (!model_.spec.hosts_ple()) return v;
  for (int s : pool_slots) {
    if (ple_live_[size_t(s)]) continue;  // present (or already listed: a slot appears once per batch but the dummy)
    for (int l = 0; l < pool_.layers(); ++l) {
      const LayerPool& lp = pool_.layer(l);
      if (!model_.spec.layers[size_t(l)].ple.hosted()) continue;
      v.push_back({lp.ple_fresh_history.get(), pool_.ple_history(l, s), lp.ple_history_pitch});
      v.push_back({nullptr, pool_.ple_conv(l, s), lp.ple_conv_pitch});
    }
    ple_live_[size_t(s)] = 1;
  }
  return v;
}

void Engine::ple_restore_copies(int slot, int n, bool to_checkpoint, std::vector<CopyDesc>& v) const {
  const SlotMeta& m = contract_.slot(slot);
  for (int l = 0; l < pool_.layers(); ++l) {
    const LayerSpec& s = model_.spec.layers[size_t(l)];
    if (!s.ple.hosted()) continue;
    const LayerPool& lp = pool_.layer(l);
    char* hist = to_checkpoint ? pool_.ple_history_checkpoint(l, slot) : pool_.ple_history(l, slot);
    char* conv = to_checkpoint ? pool_.ple_conv_checkpoint(l, slot) : pool_.ple_conv(l, slot);
    if (n == 0) {
      if (!to_checkpoint && m.has_conv_checkpoint && ple_checkpoint_[size_t(slot)]) {
        v.push_back({pool_.ple_history_checkpoint(l, slot), hist, lp.ple_history_pitch});
        v.push_back({pool_.ple_conv_checkpoint(l, slot), conv, lp.ple_conv_pitch});
      }
      continue;
    }
    if (!to_checkpoint && SSM_MUTANT("cuda_ple_not_rolled_back")) continue;  // mutant (bug class 15)
    v.push_back({pool_.ple_snapshot_conv(l, slot, n), conv, lp.ple_conv_pitch});
    const size_t H = size_t(s.ple.history_len());
    if (!to_checkpoint && SSM_MUTANT("cuda_ple_history_truncated")) {
      // mutant (bug class 15): the post-verify history with its last k - n ids dropped, EOS in front
      const size_t drop = std::min(H, size_t(m.last_verify_k - n));
      v.push_back({lp.ple_fresh_history.get(), hist, drop * 4});
      v.push_back({pool_.ple_ids_at(l, slot, m.last_verify_k), hist + drop * 4, (H - drop) * 4});
      continue;
    }
    v.push_back({pool_.ple_ids_at(l, slot, n), hist, H * 4});  // the pre-verify history + the first n tokens
  }
}

void Engine::ple_checkpoint_copies(int slot, std::vector<CopyDesc>& v) const {
  for (int l = 0; l < pool_.layers(); ++l) {
    if (!model_.spec.layers[size_t(l)].ple.hosted()) continue;
    const LayerPool& lp = pool_.layer(l);
    v.push_back({pool_.ple_history(l, slot), pool_.ple_history_checkpoint(l, slot), lp.ple_history_pitch});
    v.push_back({pool_.ple_conv(l, slot), pool_.ple_conv_checkpoint(l, slot), lp.ple_conv_pitch});
  }
}

void Engine::ple_after_restore(int slot, int n) {
  if (n >= 1) ple_live_[size_t(slot)] = 1;  // a verify ran: its snapshots hold a carry
  else if (contract_.slot(slot).has_conv_checkpoint) ple_live_[size_t(slot)] = ple_checkpoint_[size_t(slot)];
}

}  // namespace ssm::cuda
