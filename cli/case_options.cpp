// Shared case flags and the backend factory (see case_options.h).
#include "cli/case_options.h"

#include <sstream>
#include <stdexcept>

#include "reference/reference_backend.h"
#ifdef SSMCHECK_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace ssm::cli {

void CaseOptions::add_to(CLI::App* cmd, bool with_backend) {
  cmd->add_option("--preset", preset, "model preset")->capture_default_str();
  cmd->add_option("--layers", layers, "keep only the first N recurrent layers (0: all)")->capture_default_str();
  cmd->add_option("--h-mode", h_mode, "f32, f16 or f16-pool")->capture_default_str();
  cmd->add_option("--slots", slots, "pool slots")->capture_default_str();
  cmd->add_option("--capacity", capacity, "h intermediates per slot: N or a comma list per slot")
      ->capture_default_str();
  cmd->add_option("--conv-capacity", conv_capacity, "conv intermediates per slot")->capture_default_str();
  cmd->add_option("--snapshots", snapshots, "prefix-cache snapshot slots")->capture_default_str();
  cmd->add_option("--seed", seed, "seed of weights and inputs")->capture_default_str();
  cmd->add_option("--decay", decay, "0: g close to 1 (hard for FP16) .. 1: strongly decaying")
      ->capture_default_str();
  cmd->add_option("--value-scale", value_scale, "scale of value inputs (drives |h|)")->capture_default_str();
  if (with_backend) cmd->add_option("--backend", backend, "reference or cuda")->capture_default_str();
}

ModelSpec CaseOptions::spec() const { return make_preset(preset, layers); }

PoolConfig CaseOptions::pool() const {
  PoolConfig p;
  p.h_mode = parse_h_mode(h_mode);
  p.max_slots = slots;
  p.conv_capacity = conv_capacity;
  p.snapshot_slots = snapshots;
  std::vector<int> caps;
  std::stringstream ss(capacity);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      caps.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw std::invalid_argument("--capacity: '" + item + "' is not an integer");
    }
  }
  if (caps.size() == 1) caps.assign(size_t(slots), caps[0]);
  p.h_capacity = caps;
  p.validate();
  return p;
}

GenConfig CaseOptions::gen() const {
  GenConfig g;
  g.seed = seed;
  g.decay = decay;
  g.value_scale = value_scale;
  return g;
}

std::string CaseOptions::name() const {
  std::ostringstream s;
  s << "--preset " << preset;
  if (layers) s << " --layers " << layers;
  s << " --h-mode " << h_mode << " --slots " << slots << " --capacity " << capacity
    << " --conv-capacity " << conv_capacity << " --snapshots " << snapshots << " --seed " << seed
    << " --decay " << decay << " --value-scale " << value_scale;
  return s.str();
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "reference") return std::make_unique<ref::ReferenceBackend>();
#ifdef SSMCHECK_HAVE_CUDA
  if (name == "cuda") return std::make_unique<cuda::CudaBackend>();
#else
  if (name == "cuda") throw std::invalid_argument("backend 'cuda': this build has no CUDA implementation");
#endif
  throw std::invalid_argument("unknown backend '" + name + "' (expected reference or cuda)");
}

}  // namespace ssm::cli
