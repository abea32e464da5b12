// The alternate reference path (see alt_reference.h).
#include "fuzz/alt_reference.h"

#include <algorithm>

#include "core/mutant.h"

namespace ssm::fuzz::alt {


std::string AltReferenceBackend::name() const {
#ifdef SSMCHECK_MUTANTS
  if (!mutant::selected().empty()) return "reference-alt(mutant=" + mutant::selected() + ")";
#endif
  return "reference-alt";
}

StepOutputs AltReferenceBackend::prefill(int slot, const StepInputs& in) {
  const Contract& c = inner_.contract();
  c.check_prefill(slot, in);
  // FP32 prefill is T FP32 steps; f16 modes differ (prefill rounds once) and pass through
  if (c.pool().h_mode != HMode::f32) return inner_.prefill(slot, in);
  StepOutputs out;
  out.rows = in.rows;
  out.layers.resize(in.layers.size());
  out.ple.resize(in.layers.size());
  for (int t = 0; t < in.rows; ++t) {
    const StepOutputs o = inner_.decode({slot}, {in.slice(inner_.model().spec, t, 1)})[0];
    for (size_t l = 0; l < o.layers.size(); ++l) {
      out.layers[l].insert(out.layers[l].end(), o.layers[l].begin(), o.layers[l].end());
      out.ple[l].insert(out.ple[l].end(), o.ple[l].begin(), o.ple[l].end());
    }
  }
  return out;
}

std::vector<StepOutputs> AltReferenceBackend::decode(const std::vector<int>& slots,
                                                     const std::vector<StepInputs>& in) {
  inner_.contract().check_batch(OpKind::decode, slots, 1, in);
  std::vector<StepOutputs> out(slots.size());
  for (size_t i = slots.size(); i-- > 0;) {
    // mutant (bug class 4): a batch row reads its neighbour's inputs
    const size_t src = SSM_MUTANT("alt_batch_inputs_shifted") ? (i + 1) % in.size() : i;
    StepInputs row = in[src];
    if (SSM_MUTANT("alt_gate_input_half_stride"))  // mutant (bug class 16): z read at half its element size
      for (LayerRows& r : row.layers)
        for (size_t j = r.gate_in.size(); j-- > 0;) r.gate_in[j] = r.gate_in[j / 2];
    out[i] = inner_.decode({slots[i]}, {row})[0];
  }
  return out;
}

std::vector<StepOutputs> AltReferenceBackend::verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                                     const std::vector<StepInputs>& in) {
  inner_.contract().check_batch(OpKind::verify, slots, k, in);
  std::vector<StepOutputs> out(slots.size());
  for (size_t i = slots.size(); i-- > 0;) {
    if (slots[i] != kPadRow && inner_.model().spec.hosts_ple()) remember_ple_verify(slots[i], in[i]);
    out[i] = inner_.verify({slots[i]}, k, arm, {in[i]})[0];
  }
  return out;
}

void AltReferenceBackend::remember_ple_verify(int slot, const StepInputs& in) {
  const ModelSpec& spec = inner_.model().spec;
  PleVerify& v = ple_verify_[slot];
  v.history.assign(spec.layers.size(), {});
  v.tokens.assign(spec.layers.size(), {});
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    if (!s.ple.hosted()) continue;
    const std::optional<PleCarry>& c = inner_.ple_carry(slot, l);
    v.history[l] = c ? std::vector<float>(c->history.f32(), c->history.f32() + c->history.size())
                     : std::vector<float>(size_t(s.ple.history_len()), float(s.ple.eos_id));
    v.tokens[l] = in.layers[l].ple_tokens;
  }
}

void AltReferenceBackend::restore_ple(int slot, int n, const std::vector<std::optional<PleCarry>>& before) {
  const ModelSpec& spec = inner_.model().spec;
  if (!spec.hosts_ple()) return;
  const PleVerify& v = ple_verify_.at(slot);
  const int k = int(v.tokens.empty() ? 0 : inner_.contract().slot(slot).last_verify_k);
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    if (!s.ple.hosted()) continue;
    if (SSM_MUTANT("alt_ple_not_rolled_back")) {  // mutant (bug class 15): the live carry stays
      inner_.set_ple_carry(slot, l, *before[l]);
      continue;
    }
    // the history rebuilt from the pre-verify history plus the first n tokens (the reference's
    // snapshot n holds it whole: the lockstep checks they agree)
    const size_t H = size_t(s.ple.history_len());
    const std::vector<float>& pre = v.history[l];
    const std::vector<float>& tok = v.tokens[l];
    std::vector<float> h = pre;
    h.insert(h.end(), tok.begin(), tok.begin() + n);
    if (SSM_MUTANT("alt_ple_history_truncated")) {
      // mutant (bug class 15): the post-verify history with its last k - n ids dropped and EOS
      // filled in front, instead of the rebuild
      std::vector<float> post = pre;
      post.insert(post.end(), tok.begin(), tok.end());
      post.erase(post.begin(), post.end() - long(H));
      const size_t drop = std::min(H, size_t(k - n));
      h.assign(drop, float(s.ple.eos_id));
      h.insert(h.end(), post.begin(), post.end() - long(drop));
    }
    PleCarry c = *inner_.ple_carry(slot, l);
    std::copy(h.end() - long(H), h.end(), c.history.f32());
    inner_.set_ple_carry(slot, l, c);
  }
}

void AltReferenceBackend::commit(int slot, int n, int k) {
  if (SSM_MUTANT("alt_commit_zero_accepted") && n == 0) return;  // mutant (bug class 13)
  inner_.contract().check_commit(slot, n, k);
  if (n == k) return;
  // the same copies as commit once the checks passed; mutant (bug class 2): intermediate n instead
  // of n-1 whenever it exists
  std::vector<std::optional<PleCarry>> before;  // the live carries, for the mutant that keeps them
  if (SSM_MUTANT("alt_ple_not_rolled_back"))
    for (size_t l = 0; l < inner_.model().spec.layers.size(); ++l) before.push_back(inner_.ple_carry(slot, l));
  const int restored = SSM_MUTANT("alt_commit_off_by_one") && n + 1 < k ? n + 1 : n;
  inner_.rollback(slot, restored, false);
  restore_ple(slot, restored, before);
}

std::unique_ptr<Backend> make_alt_backend() { return std::make_unique<AltReferenceBackend>(); }

void AltReferenceBackend::rollback(int slot, int n, bool and_checkpoint) {
  if (!and_checkpoint) return inner_.rollback(slot, n, false);
  inner_.contract().check_rollback(OpKind::rollback_and_checkpoint_async, slot, n);
  inner_.rollback(slot, n, false);
  inner_.checkpoint(slot, false);
}

}  // namespace ssm::fuzz::alt
