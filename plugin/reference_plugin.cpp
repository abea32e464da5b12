// ssmcheck's CPU reference as a plug-in: libssmcheck_reference_plugin.so, through
// backend_plugin.cpp's adapter. Run through `--backend plugin:.../libssmcheck_reference_plugin.so`
// it must agree with the reference bit for bit, so it declares SSMP_BITWISE, and it makes its own
// legality decisions (SSMP_OWN_LEGALITY), so its refusals are compared with the contract's.
//
// Options (key=value after the path), deliberate faults that show the harness catching a broken
// implementation (docs/plugins.md):
//   fault=commit_keeps_live   commit n < k keeps the live state instead of restoring n-1
//   fault=abort_in_commit     commit calls abort(): a plug-in that crashes
//   fault=throw_in_decode     decode fails (SSMP_ERROR): a plug-in that reports an error
//   fault=ple_not_rolled_back commit n < k restores h and conv but keeps the PLE carry after all K
//                             rows (bug class 15, through SSMP_PLE)
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <vector>

#include "plugin/backend_plugin.h"
#include "reference/reference_backend.h"

namespace {

using namespace ssm;

class ReferenceWithFault : public ref::ReferenceBackend {
 public:
  explicit ReferenceWithFault(std::string fault) : fault_(std::move(fault)) {}
  void commit(int slot, int n, int k) override {
    if (fault_ == "abort_in_commit") std::abort();
    // the deliberate bug: checked as usual, then the live state (all K rows applied) is kept
    if (fault_ == "commit_keeps_live" && n > 0 && n < k) return ReferenceBackend::commit(slot, k, k);
    if (fault_ == "ple_not_rolled_back" && n > 0 && n < k) {  // the PLE carry after all K rows stays
      std::vector<std::optional<PleCarry>> after_k;
      for (size_t l = 0; l < model().spec.layers.size(); ++l) after_k.push_back(ple_carry(slot, l));
      ReferenceBackend::commit(slot, n, k);
      for (size_t l = 0; l < after_k.size(); ++l)
        if (after_k[l]) set_ple_carry(slot, l, *after_k[l]);
      return;
    }
    ReferenceBackend::commit(slot, n, k);
  }
  std::vector<StepOutputs> decode(const std::vector<int>& slots, const std::vector<StepInputs>& in) override {
    if (fault_ == "throw_in_decode") throw std::runtime_error("deliberate fault: throw_in_decode");
    return ReferenceBackend::decode(slots, in);
  }

 private:
  std::string fault_;
};

// the faults of the header comment, by option value
constexpr const char* kFaults[] = {"commit_keeps_live", "abort_in_commit", "throw_in_decode", "ple_not_rolled_back"};

std::unique_ptr<Backend> make(const std::string& options) {
  std::string fault;
  size_t start = 0;
  while (start < options.size()) {
    const size_t end = std::min(options.find(',', start), options.size());
    const std::string kv = options.substr(start, end - start);
    const std::string name = kv.rfind("fault=", 0) == 0 ? kv.substr(6) : "";
    if (std::find(std::begin(kFaults), std::end(kFaults), name) == std::end(kFaults)) {
      std::string names;
      for (const char* f : kFaults) names += std::string(names.empty() ? "" : ", ") + "fault=" + f;
      throw std::invalid_argument("unknown option '" + kv + "' (known: " + names + ")");
    }
    fault = name;
    start = end + 1;
  }
  if (fault.empty()) return std::make_unique<ref::ReferenceBackend>();
  return std::make_unique<ReferenceWithFault>(fault);
}

}  // namespace

extern "C" SSMP_EXPORT const ssmp_plugin* ssmcheck_plugin(void) {
  static const ssmp_plugin* table = plugin::expose(
      {"ssmcheck reference (CPU, as a plug-in)", SSMP_OWN_LEGALITY | SSMP_BITWISE | SSMP_MAMBA2 | SSMP_PLE, make,
       /*async_copies=*/false, /*capabilities=*/nullptr, /*perturbable=*/false, /*field_digests=*/true});
  return table;
}
