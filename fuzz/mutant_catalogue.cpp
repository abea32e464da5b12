// The mutant catalogue (see mutant_catalogue.h): the one list of mutants.
#include "fuzz/mutant_catalogue.h"

namespace ssm::fuzz {

const std::vector<MutantInfo>& mutant_catalogue() {
  static const std::vector<MutantInfo> v = {
      // CPU: the alternate reference path (fuzz/alt_reference.cpp) and the shared contract (core/contract.cpp)
      {"alt_commit_off_by_one", 2, "reference", "commit restores intermediate n instead of n-1"},
      {"alt_commit_zero_accepted", 13, "reference", "commit with n == 0 is accepted and does nothing"},
      {"alt_batch_inputs_shifted", 4, "reference", "a batch row reads its neighbour's inputs"},
      {"alt_gate_input_half_stride", 16, "reference",
       "the output gate z is read with half the element size (BF16 stride over FP32 rows)"},
      {"alt_ple_not_rolled_back", 15, "reference",
       "commit of a partial accept restores h and conv but leaves the PLE carry as the verify left it"},
      {"alt_ple_history_truncated", 15, "reference",
       "commit of a partial accept truncates the post-verify PLE history (EOS in front) instead of rebuilding it"},
      {"contract_capacity_off_by_one", 3, "reference",
       "the shared contract lets a verify write one intermediate beyond the slot's capacity"},
      {"contract_commit_k_unchecked", 13, "reference",
       "the shared contract accepts a commit whose k is not the last verify's K"},
      // CUDA: host sequencing (cuda/engine.cpp) and kernels (cuda/*.cu)
      {"cuda_verify_no_h_intermediates", 1, "cuda", "verify writes no h intermediates"},
      {"cuda_restore_off_by_one", 2, "cuda", "commit and rollback restore intermediate n instead of n-1"},
      {"cuda_inter_stride", 4, "cuda",
       "the row kernel indexes the intermediate table one slot off: a sequence's intermediates land in its "
       "neighbour's"},
      {"cuda_multirow_no_softplus_threshold", 5, "cuda",
       "the multi-row arms (verify, prefill) drop the softplus threshold (20) that decode applies"},
      {"cuda_to_f16_skipped", 6, "cuda", "f16 mode: the first decode marks h FP16 without converting it"},
      {"cuda_f16_pool_prefill_no_widen", 7, "cuda",
       "f16-pool prefill runs on the FP32 stage without widening the slot into it first"},
      {"cuda_checkpoint_conv_zero_bytes", 8, "cuda", "checkpoint copies zero bytes of the conv window"},
      {"cuda_h_store_clamp", 9, "cuda", "FP32 h stores clamp to +-1024, a clamp the reference does not have"},
      {"cuda_dt_bias_as_bf16", 10, "cuda", "the conv kernel reads the FP32 dt_bias as BF16 (upper half of each word)"},
      {"cuda_alloc_no_zero", 11, "cuda", "alloc does not zero a reused slot's h"},
      {"cuda_pad_row_writes_claimed", 11, "cuda", "padding rows run on slot 0 instead of the dummy slot"},
      {"cuda_rollback_partial_on_error", 12, "cuda",
       "rollback restores layer 0 before it checks the op, so a refused rollback changes one layer"},
      {"cuda_ple_not_rolled_back", 15, "cuda",
       "commit and rollback of a partial accept restore h and conv but not the PLE carry"},
      {"cuda_ple_history_truncated", 15, "cuda",
       "a partial accept truncates the post-verify PLE history (EOS in front) instead of rebuilding it"},
      {"cuda_async_reader_no_wait", 14, "cuda",
       "rollback and restore read the checkpoint without waiting on the async checkpoint's event"},
      {"cuda_conv_races_widen", 20, "cuda",
       "after a widen of FP16 h the conv kernel is launched as a programmatic dependent, so the row kernels it "
       "lets start load H before the widen's stores are visible (issue 41's f16-pool prefill divergence)"},
      {"cuda_commit_reads_last_intermediate", 17, "cuda",
       "commit n == k restores intermediate K-1, which the verify did not write"},
      {"cuda_rows_missing_barrier", 18, "cuda",
       "the row kernel reads the H^T k partials without the barrier after they are written", "odd-d",
       "alloc; decode @0,pad,pad,pad,pad,pad,pad,pad,pad"},
      {"cuda_conv_window_one_wave", 19, "cuda",
       "each Q/K head's conv outputs are recomputed by a sibling block from the live window, which the head's "
       "own block commits in place: right only while the sibling reads first, as when the grid fits one wave "
       "(lightseekorg/tokenspeed #857)"},
  };
  return v;
}

const MutantInfo* find_mutant(const std::string& name) {
  for (const MutantInfo& m : mutant_catalogue())
    if (m.name == name) return &m;
  return nullptr;
}

const std::vector<UncoveredClass>& uncovered_bug_classes() {
  static const std::vector<UncoveredClass> v = {
  };
  return v;
}

}  // namespace ssm::fuzz
