// Planted slips of the state model, for the failure-report tests (tests/failure_report_test.cpp): the
// reference with one slip chosen by `slip=NAME`, each a bug engines really ship:
//   commit_off_by_one      commit n < k-1 restores intermediate n instead of n-1
//   rollback_off_by_one    rollback n restores intermediate n instead of n-1
//   h_transposed           h exported as [nv][vd][kd] without declaring SSMP_H_VD_KD
//   conv_shifted_twice     the conv window exported one column further on (shifted twice)
//   f16_store_inf          FP16 h stores overflow to inf where the contract saturates at 65504
//   intermediates_one_off  h intermediate t holds the state after row t+1
//   checkpoint_aliased     the h checkpoint follows the live h (the same buffer)
//   output_round_up        every other output element one FP32 ULP up (a final multiply that
//                          rounds up): far inside every tolerance, caught by the bias check only
//   flaky_commit           commit_off_by_one on the first partial commit of the process only (a
//                          race that shows once): its rerun does not fail
//   gates_torch            torch's gates (softplus linear above 20, no clamps) without declaring
//                          SSMP_GATES_TORCH: found by rerunning the case under that convention
//   perturbed_only         commit_off_by_one once its schedule is perturbed (perturb_schedule): a
//                          bug the usual schedule hides, as one that needs a second wave
//   heads_tiled            value head v reads key head v % nk (Mamba-2: head h reads group h % ng)
//                          instead of the grouped v / (nv/nk): found by rerunning the case with the
//                          reference mapping heads tiled
//   pad_into_slot0         each padding row of a decode or verify also runs on pool slot 0, after
//                          the batch's rows (a padding slot id clamped to 0): found by a rerun too
// It offers a perturbed schedule (ssmp_plugin.perturb_schedule, with every option).
// No option: the reference as it is (it must get no hint in any campaign). Judged under the
// tolerance classes (no SSMP_BITWISE), as most engines are.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>

#include "core/half.h"
#include "plugin/backend_plugin.h"
#include "reference/reference_backend.h"

namespace {

using namespace ssm;

constexpr const char* kSlips[] = {
    "commit_off_by_one",     "rollback_off_by_one", "h_transposed",    "conv_shifted_twice", "f16_store_inf",
    "intermediates_one_off", "checkpoint_aliased",  "output_round_up", "flaky_commit",       "gates_torch",
    "perturbed_only",        "heads_tiled",         "pad_into_slot0"};

// [a][b][c] -> the same values laid out [a][c][b]
Tensor transposed(const Tensor& t) {
  const auto& s = t.shape();
  Tensor out = t;
  const int64_t a = s[0], b = s[1], c = s[2];
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) {
        const int64_t from = (i * b + j) * c + k, to = (i * c + k) * b + j;
        if (t.dtype() == DType::f32) out.f32()[to] = t.f32()[from];
        else out.f16()[to] = t.f16()[from];
      }
  return out;
}

class Slipped : public ref::ReferenceBackend {
 public:
  explicit Slipped(std::string slip) : slip_(std::move(slip)) {}
  void create_pool(const Model& model, const PoolConfig& pool) override {
    Model slipped = model;
    for (LayerSpec& l : slipped.spec.layers) {
      if (slip_ == "gates_torch") l.numerics.gates = GateMath::torch;
      if (slip_ == "heads_tiled") l.tiled_heads = true;
    }
    ReferenceBackend::create_pool(slipped, pool);
  }
  bool perturb_schedule(uint64_t) override {
    perturbed_ = true;
    return true;
  }
  void commit(int slot, int n, int k) override {
    static bool flaked = false;  // flaky_commit: once per process
    const bool flake = (slip_ == "flaky_commit" && !flaked && n > 0 && n < k - 1) ||
                       (slip_ == "perturbed_only" && perturbed_ && n > 0 && n < k - 1);
    if (flake && slip_ == "flaky_commit") flaked = true;
    if ((slip_ == "commit_off_by_one" || flake) && n > 0 && n < k - 1) {
      ReferenceBackend::commit(slot, n + 1, k);
      return;
    }
    ReferenceBackend::commit(slot, n, k);
  }
  void rollback(int slot, int n, bool and_checkpoint) override {
    const int k = export_state(slot).last_verify_k;
    if (slip_ == "rollback_off_by_one" && n > 0 && n + 1 < k)
      return ReferenceBackend::rollback(slot, n + 1, and_checkpoint);
    ReferenceBackend::rollback(slot, n, and_checkpoint);
  }
  StepOutputs prefill(int slot, const StepInputs& in) override { return nudged(ReferenceBackend::prefill(slot, in)); }
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override {
    std::vector<StepOutputs> out = nudged(ReferenceBackend::decode(slots, in));
    if (slip_ == "pad_into_slot0")
      for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i] == kPadRow && live_.count(0)) try {
            ReferenceBackend::decode({0}, {in[i]});
          } catch (const std::exception&) {  // slot 0 cannot run it now (awaiting a commit)
          }
    return out;
  }
  std::vector<StepOutputs> verify(const std::vector<int>& slots, int k, VerifyArm arm,
                                  const std::vector<StepInputs>& in) override {
    std::vector<StepOutputs> out = nudged(ReferenceBackend::verify(slots, k, arm, in));
    if (slip_ == "pad_into_slot0")
      for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i] == kPadRow && live_.count(0)) try {
            ReferenceBackend::verify({0}, k, arm, {in[i]});
          } catch (const std::exception&) {  // slot 0 cannot run it now (awaiting a commit)
          }
    return out;
  }
  int alloc(int min_capacity) override {
    const int slot = ReferenceBackend::alloc(min_capacity);
    live_.insert(slot);
    return slot;
  }
  void release(int slot) override {
    ReferenceBackend::release(slot);
    live_.erase(slot);
  }
  SequenceState export_state(int slot) override {
    SequenceState s = ReferenceBackend::export_state(slot);
    for (LayerState& L : s.layers) {
      if (slip_ == "h_transposed") L.h = transposed(L.h);
      if (slip_ == "conv_shifted_twice") {
        const int64_t rows = L.conv.shape()[0], cols = L.conv.shape()[1];
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c + 1 < cols; ++c) L.conv.f32()[r * cols + c] = L.conv.f32()[r * cols + c + 1];
      }
      if (slip_ == "f16_store_inf" && L.h.dtype() == DType::f16)
        for (int64_t i = 0; i < L.h.size(); ++i)
          if (std::fabs(L.h.get(i)) == 65504.0f)
            L.h.f16()[i] = float_to_half_rne(L.h.get(i) > 0 ? INFINITY : -INFINITY);
      if (slip_ == "intermediates_one_off")
        for (size_t t = 0; t + 1 < L.h_intermediates.size(); ++t) L.h_intermediates[t] = L.h_intermediates[t + 1];
      if (slip_ == "checkpoint_aliased" && L.h_checkpoint) L.h_checkpoint = L.h;
    }
    return s;
  }
  // the slips live in the export: no digest shortcut that would hide them
  std::optional<FieldDigests> field_digests(int) override { return std::nullopt; }
  void export_update(int slot, const FieldDigests&, const FieldDigests&, SequenceState& state) override {
    state = export_state(slot);
  }

 private:
  std::string slip_;
  bool perturbed_ = false;
  std::set<int> live_;  // allocated slots (pad_into_slot0 writes slot 0 only while it is one)
  // output_round_up: elements 0, 2, 4, ... of every output one ULP towards +inf
  StepOutputs nudged(StepOutputs o) const {
    if (slip_ == "output_round_up")
      for (std::vector<float>& layer : o.layers)
        for (size_t i = 0; i < layer.size(); i += 2) layer[i] = std::nextafter(layer[i], INFINITY);
    return o;
  }
  std::vector<StepOutputs> nudged(std::vector<StepOutputs> v) const {
    for (StepOutputs& o : v) o = nudged(std::move(o));
    return v;
  }
};

std::unique_ptr<Backend> make(const std::string& options) {
  if (options.empty()) return std::make_unique<Slipped>("");  // the reference, with a perturbed schedule to offer
  const std::string name = options.rfind("slip=", 0) == 0 ? options.substr(5) : "";
  if (std::find(std::begin(kSlips), std::end(kSlips), name) == std::end(kSlips))
    throw std::invalid_argument("unknown option '" + options + "' (expected slip=NAME, tests/plugins/slip_plugin.cpp)");
  return std::make_unique<Slipped>(name);
}

}  // namespace

extern "C" SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  static const ssmp_plugin* table = plugin::expose(
      {"slips (the reference with one planted slip)", SSMP_MAMBA2, make, false, nullptr, /*perturbable=*/true});
  return table;
}
