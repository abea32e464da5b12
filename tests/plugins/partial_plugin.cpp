// A vLLM-like partial implementation, for the capability tests (tests/capabilities_test.cpp): the
// reference, declaring that it runs GDN layers only, FP32 state only, no snapshots, the exact
// verify arm only (its checkpoint_async is a plain copy), no padding rows, batches of at
// most 3 entries, verifies of K <= 4 and pools of at most 8 slots, and no async path; ssmcheck's
// contract decides legality for it. Anything outside that declaration fails the call loudly
// (SSMP_ERROR naming what it got), so a harness that draws outside it cannot pass.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "plugin/backend_plugin.h"
#include "reference/reference_backend.h"

namespace {

using namespace ssm;

constexpr int kMaxBatch = 3, kMaxVerifyK = 4, kMaxSlots = 8;

const ssmp_capabilities kCapabilities = {
    .struct_size = sizeof(ssmp_capabilities),
    .h_modes = SSMP_RUNS_F32,
    .transitions = SSMP_T_CHECKPOINT_ASYNC | SSMP_T_ROLLBACK_AND_CHECKPOINT_ASYNC | SSMP_T_VERIFY_EXACT,
    .max_batch = kMaxBatch,
    .max_verify_k = kMaxVerifyK,
    .max_slots = kMaxSlots,
};

[[noreturn]] void outside(const std::string& what) {
  throw std::runtime_error("partial plug-in: called outside its declared capabilities: " + what);
}

class Partial : public ref::ReferenceBackend {
 public:
  void create_pool(const Model& model, const PoolConfig& pool) override {
    if (pool.h_mode != HMode::f32) outside(std::string("h mode ") + to_string(pool.h_mode));
    if (pool.max_slots > kMaxSlots) outside(std::to_string(pool.max_slots) + " slots");
    for (const LayerSpec& l : model.spec.layers)
      if (l.kind != LayerKind::gdn || l.ple.hosted()) outside("layer " + l.name());
    ReferenceBackend::create_pool(model, pool);
  }
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override {
    batch("decode", slots);
    return ReferenceBackend::decode(slots, in);
  }
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override {
    batch("verify", slots);
    if (arm != VerifyArm::exact) outside("the WY verify arm");
    if (k > kMaxVerifyK) outside("verify K = " + std::to_string(k));
    return ReferenceBackend::verify(slots, k, arm, in);
  }
  void to_f16(int) override { outside("to_f16"); }
  void snapshot_save(int, int) override { outside("snapshot_save"); }
  void snapshot_restore(int, int) override { outside("snapshot_restore"); }

 private:
  static void batch(const char* op, const std::vector<int>& slots) {
    if (int(slots.size()) > kMaxBatch) outside(std::string(op) + " of " + std::to_string(slots.size()) + " rows");
    if (std::count(slots.begin(), slots.end(), kPadRow)) outside(std::string(op) + " with a padding row");
  }
};

}  // namespace

extern "C" SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  static const ssmp_plugin* table =
      plugin::expose({"partial (the reference, FP32 GDN only, vLLM-like)", SSMP_BITWISE,
                      [](const std::string& options) -> std::unique_ptr<Backend> {
                        if (!options.empty())
                          throw std::invalid_argument("unknown option '" + options + "' (it takes none)");
                        return std::make_unique<Partial>();
                      },
                      /*async_copies=*/false, &kCapabilities});
  return table;
}
