// The alternate reference path (see alt_reference.h).
#include "fuzz/alt_reference.h"

namespace ssm::fuzz::SSM_ALT_NS {

namespace {
StepInputs row_of(const ModelSpec& spec, const StepInputs& in, int t) {
  StepInputs out;
  out.rows = 1;
  for (size_t l = 0; l < in.layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    const LayerRows& r = in.layers[l];
    auto cut = [t](const std::vector<float>& v, int w) {
      return std::vector<float>(v.begin() + long(t) * w, v.begin() + long(t + 1) * w);
    };
    out.layers.push_back(LayerRows{cut(r.x, s.conv_dim()), cut(r.a, s.nv), cut(r.b, s.nv), cut(r.z, s.out_dim())});
  }
  return out;
}
}  // namespace

std::string AltReferenceBackend::name() const {
#ifdef SSMCHECK_MUTANT
  return std::string("reference-alt(mutant=") + SSMCHECK_MUTANT + ")";
#else
  return "reference-alt";
#endif
}

StepOutputs AltReferenceBackend::prefill(int slot, const StepInputs& in) {
  const Contract& c = inner_.contract();
  c.check_prefill(slot, in);
  // FP32 prefill is T FP32 steps; f16 modes differ (prefill rounds once) and pass through
  if (c.pool().h_mode != HMode::f32) return inner_.prefill(slot, in);
  StepOutputs out;
  out.rows = in.rows;
  out.layers.resize(in.layers.size());
  for (int t = 0; t < in.rows; ++t) {
    const StepOutputs o = inner_.decode({slot}, {row_of(inner_.model().spec, in, t)})[0];
    for (size_t l = 0; l < o.layers.size(); ++l)
      out.layers[l].insert(out.layers[l].end(), o.layers[l].begin(), o.layers[l].end());
  }
  return out;
}

std::vector<StepOutputs> AltReferenceBackend::decode(const std::vector<int>& slots,
                                                     const std::vector<StepInputs>& in) {
  inner_.contract().check_batch(OpKind::decode, slots, 1, in);
  std::vector<StepOutputs> out(slots.size());
#if defined(SSMCHECK_MUTANT_BATCH_INPUTS_SHIFTED)
  // bug classes 4/16: a batch row reads its neighbour's inputs
  for (size_t i = slots.size(); i-- > 0;) out[i] = inner_.decode({slots[i]}, {in[(i + 1) % in.size()]})[0];
#else
  for (size_t i = slots.size(); i-- > 0;) out[i] = inner_.decode({slots[i]}, {in[i]})[0];
#endif
  return out;
}

std::vector<StepOutputs> AltReferenceBackend::verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                                     const std::vector<StepInputs>& in) {
  inner_.contract().check_batch(OpKind::verify, slots, k, in);
  std::vector<StepOutputs> out(slots.size());
  for (size_t i = slots.size(); i-- > 0;) out[i] = inner_.verify({slots[i]}, k, arm, {in[i]})[0];
  return out;
}

void AltReferenceBackend::commit(int slot, int n, int k) {
#if defined(SSMCHECK_MUTANT_COMMIT_ZERO_ACCEPTED)
  if (n == 0) return;  // bug class 13: commit with n == 0 accepted silently
#endif
  inner_.contract().check_commit(slot, n, k);
  if (n == k) return;
#if defined(SSMCHECK_MUTANT_COMMIT_OFF_BY_ONE)
  // bug class 2: restores intermediate n instead of n-1 whenever it exists
  inner_.rollback(slot, n + 1 < k ? n + 1 : n, false);
#else
  inner_.rollback(slot, n, false);  // the same copies as commit once the checks passed
#endif
}

std::unique_ptr<Backend> make_alt_backend() { return std::make_unique<AltReferenceBackend>(); }

void AltReferenceBackend::rollback(int slot, int n, bool and_checkpoint) {
  if (!and_checkpoint) return inner_.rollback(slot, n, false);
  inner_.contract().check_rollback(OpKind::rollback_and_checkpoint_async, slot, n);
  inner_.rollback(slot, n, false);
  inner_.checkpoint(slot, false);
}

}  // namespace ssm::fuzz::SSM_ALT_NS
