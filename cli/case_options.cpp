// Shared case flags (see case_options.h).
#include "cli/case_options.h"

#include <stdexcept>

#include "cli/backend_registry.h"

namespace ssm::cli {

void CaseOptions::add_to(CLI::App* cmd, bool with_backend) {
  CaseConfig& c = config;
  std::string presets;
  for (const std::string& p : preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  auto* preset = cmd->add_option("--preset", c.preset, "model preset: " + presets)->capture_default_str();
  cmd->add_option("--config", c.config_path,
                  "a Hugging Face config.json instead of a preset (its recurrent layers; docs/hf-config.md)")
      ->excludes(preset);
  cmd->add_option("--layers", c.layers, "keep only the first N recurrent layers (0: all)")->capture_default_str();
  // (resolve() reads the config, so a bad file is an error naming the file and field before any work)
  cmd->add_option("--h-mode", h_mode, "f32, f16 or f16-pool")->capture_default_str();
  cmd->add_option("--slots", c.slots, "pool slots")->capture_default_str();
  cmd->add_option("--capacity", capacity, "h intermediates per slot: N or a comma list per slot")
      ->capture_default_str();
  cmd->add_option("--conv-capacity", c.conv_capacity, "conv intermediates per slot")->capture_default_str();
  cmd->add_option("--snapshots", c.snapshots, "prefix-cache snapshot slots")->capture_default_str();
  cmd->add_option("--seed", c.gen.seed, "seed of weights and inputs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decay", c.gen.decay, "0: g close to 1 (hard for FP16) .. 1: strongly decaying")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--value-scale", c.gen.value_scale, "scale of value inputs (drives |h|)")
      ->capture_default_str()
      ->check(CLI::Range(1e-30, 1e30));
  cmd->add_flag("--extreme-gates", c.gen.extreme_gates,
                "gate parameters at the softplus threshold, the A_log clamp and both g clamps");
  if (with_backend) cmd->add_option("--backend", backend, backend_choices())->capture_default_str();
}

CaseConfig CaseOptions::resolve() const {
  CaseConfig c = config;
  c.h_mode = parse_h_mode(h_mode);
  c.capacity = parse_int_list(capacity, "--capacity");
  c.pool();  // validates
  if (!c.config_path.empty()) c.spec();  // reads and checks the config (an error names file and field)
  return c;
}

}  // namespace ssm::cli
