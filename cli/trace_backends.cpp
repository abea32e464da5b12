// Backend selection for replay and gate (see trace_backends.h).
#include "cli/trace_backends.h"

#include <stdexcept>

#include "cli/case_options.h"
#ifdef SSMCHECK_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace ssm::cli {

namespace {
// "" when cuda is usable, else why not.
std::string cuda_unavailable() {
#ifdef SSMCHECK_HAVE_CUDA
  std::string why;
  if (cuda::device_available(&why)) return "";
  return why;
#else
  return "this build has no CUDA implementation";
#endif
}
}  // namespace

std::vector<replay::GateBackend> trace_backends(const std::string& which,
                                                std::vector<std::pair<std::string, std::string>>* skipped) {
  if (which != "reference" && which != "cuda" && which != "all")
    throw std::invalid_argument("unknown backend '" + which + "' (expected reference, cuda or all)");
  std::vector<replay::GateBackend> v;
  if (which == "reference" || which == "all")
    v.push_back({"reference", [] { return make_backend("reference"); }});
  if (which == "cuda" || which == "all") {
    const std::string why = cuda_unavailable();
    if (why.empty()) v.push_back({"cuda", [] { return make_backend("cuda"); }});
    else if (which == "cuda") throw std::invalid_argument("backend cuda: " + why);
    else if (skipped) skipped->emplace_back("cuda", why);
  }
  return v;
}

}  // namespace ssm::cli
