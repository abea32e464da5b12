// Shared case flags (see case_options.h).
#include "cli/case_options.h"

#include <stdexcept>

#include "cli/backend_registry.h"
#include "cli/device_option.h"

namespace ssm::cli {

void NumericsFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--gates", gates,
                  "gate saturation: clamped (the contract's: softplus argument, A_log and g clamped) or torch (Hugging "
                  "Face transformers, vLLM, fla: softplus linear above 20, no clamps); default: what the backend "
                  "declares, else clamped");
  cmd->add_option("--f16-store", f16_store,
                  "FP16 state stores: saturate (the contract's: clamp to +-65504, NaN -> -65504) or inf (triton's and "
                  "torch's conversion: overflow to inf); default: what the backend declares, else saturate");
  cmd->add_option("--f16-rows", f16_rows,
                  "rows of one op on FP16 state: stored (the contract's: each row reads the stored FP16 state) or "
                  "carried (vLLM, fla: FP32 across the rows, outputs read it); default: what the backend declares, "
                  "else stored");
}

Numerics NumericsFlags::resolve(const Numerics& declared) const {
  Numerics n = declared;
  const auto apply = [](const std::string& flag, const char* name, auto parse, auto& field) {
    if (flag.empty()) return;
    try {
      field = parse(flag);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(name) + ": " + e.what());
    }
  };
  apply(gates, "--gates", parse_gate_math, n.gates);
  apply(f16_store, "--f16-store", parse_f16_store, n.f16_store);
  apply(f16_rows, "--f16-rows", parse_f16_rows, n.f16_rows);
  return n;
}

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
  numerics.add_to(cmd);
  if (with_backend) {
    cmd->add_option("--backend", backend, backend_choices())->capture_default_str();
    add_device_option(cmd);
  }
}

CaseConfig CaseOptions::resolve() const {
  CaseConfig c = config;
  c.h_mode = parse_h_mode(h_mode);
  c.capacity = parse_int_list(capacity, "--capacity");
  c.numerics = numerics.resolve(declared_numerics(backend));
  c.pool();  // validates
  if (!c.config_path.empty()) c.spec();  // reads and checks the config (an error names file and field)
  return c;
}

}  // namespace ssm::cli
