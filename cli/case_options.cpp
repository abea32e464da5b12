// Shared case flags (see case_options.h).
#include "cli/case_options.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "cli/backend_registry.h"
#include "cli/device_option.h"
#include "formats/memory_limit.h"

namespace ssm::cli {

namespace {

// A floating flag's value must be a finite number: CLI11's Range lets NaN through (every
// comparison with it is false), and a NaN weight or input would fail far from the flag.
CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0') return "'" + v + "' is not a number";
        if (!std::isfinite(x)) return "'" + v + "' is not a finite number";
        return "";
      },
      "FINITE");
}

// An integer flag's value inside lo..hi, checked before anything is sized by it.
void check_range(const char* flag, long long v, long long lo, long long hi, const char* what) {
  if (v < lo || v > hi)
    throw std::invalid_argument(std::string(flag) + " " + std::to_string(v) + ": " + what + " must be in " +
                                std::to_string(lo) + ".." + std::to_string(hi));
}

// The model's weights and one sequence's h and conv (FP32), from the geometry: the least a backend
// allocates for `alloc`. More than this process can use is an error naming the model, not std::bad_alloc.
void check_case_size(const ModelSpec& spec, const std::string& model, int layers) {
  double bytes = 0;
  for (const LayerSpec& l : spec.layers) {
    for (const WeightField& f : l.weights()) {
      double n = 4;
      for (int64_t d : f.shape) n *= double(d);
      bytes += n;
    }
    bytes += 4 * (double(l.h_elems()) + double(l.conv_elems()));
  }
  const formats::MemoryLimit lim = formats::memory_limit();
  if (bytes > double(lim.bytes))
    throw std::invalid_argument(model + (layers > 0 ? " --layers " + std::to_string(layers) : std::string()) + ": " +
                                std::to_string(spec.layers.size()) +
                                " layers whose weights and one sequence's state "
                                "need at least " +
                                formats::size_text(bytes) +
                                ", more than the memory this process can use: " + lim.text());
}

}  // namespace

void check_layers_flag(int layers, const ModelSpec& whole, const std::string& model) {
  if (layers < 0)
    throw std::invalid_argument("--layers " + std::to_string(layers) + ": must be >= 0 (0: all of the model's layers)");
  if (size_t(layers) > whole.layers.size())
    throw std::invalid_argument("--layers " + std::to_string(layers) + ": " + model + " has " +
                                std::to_string(whole.layers.size()) + " recurrent layers (expected 1.." +
                                std::to_string(whole.layers.size()) + ", or 0 for all)");
}

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
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--value-scale", c.gen.value_scale, "scale of value inputs (drives |h|)")
      ->capture_default_str()
      ->check(finite_number())
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
  // the pool's flags, named, before anything is sized by them (--slots 2000000000 would build a
  // capacity list of 8 GB before PoolConfig::validate saw it)
  check_range("--slots", c.slots, 1, kMaxPoolSlots, "pool slots");
  check_range("--snapshots", c.snapshots, 0, kMaxPoolSlots, "snapshot slots");
  check_range("--conv-capacity", c.conv_capacity, 0, kMaxIntermediates, "conv intermediates per slot");
  for (int cap : c.capacity) check_range("--capacity", cap, 0, kMaxIntermediates, "h intermediates per slot");
  c.numerics = numerics.resolve(declared_numerics(backend));
  c.pool();  // validates
  // --layers against the model's layer count (a config is read here: an error names file and field)
  CaseConfig whole = c;
  whole.layers = 0;
  const std::string model = c.config_path.empty() ? "--preset " + c.preset : "--config " + c.config_path;
  check_layers_flag(c.layers, whole.spec(),
                    c.config_path.empty() ? "preset " + c.preset : "config.json " + c.config_path);
  check_case_size(c.spec(), model, c.layers);  // before any backend allocates a byte
  return c;
}

}  // namespace ssm::cli
