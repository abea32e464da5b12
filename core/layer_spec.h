// Layer and model shapes (STATE-MODEL section 1) and the named presets.
// Counterparts: core/layer_spec.cpp (presets, printing).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ssm {

enum class LayerKind { gdn, mamba2 };
enum class OutputGate { silu, sigmoid };  // out *= silu(z) (Qwen) or sigmoid(z)
// The gates' saturation (docs/state-model.md, "One token", step 2):
// clamped: the contract's (the seed's engine): dt = softplus(min(x, 20)), A = exp(min(A_log, 20)),
//          g = clamp(exp(-A dt), 1e-6, 1 - 1e-6);
// torch:   Hugging Face transformers' Qwen3-Next, vLLM's fused_gdn_gating, fla's in-kernel gate:
//          dt = x > 20 ? x : log(1 + exp(x)) (torch's softplus threshold), A = exp(A_log), g = exp(-A dt).
// They agree wherever x <= 20, A_log <= 20 and 1e-6 <= g <= 1 - 1e-6.
enum class GateMath { clamped, torch };
// How a kernel stores FP16 state (docs/state-model.md, "FP16 h"):
// saturate: the contract's (the seed's kernels): clamp to +-65504 first, NaN becomes -65504;
// inf:      triton's and torch's conversion (vLLM's and fla's kernels): round to nearest even,
//           overflow gives +-inf, NaN stays NaN.
// They agree wherever |h| <= 65504. (The converter, to_f16 and the f16-pool narrow, is the same in both.)
enum class F16Store { saturate, inf };
// What the rows of one decode or verify read when h is FP16 (docs/state-model.md, "FP16 h"):
// stored:  the contract's: every row computes from the stored (rounded) FP16 state and its output
//          reads the state it stored;
// carried: vLLM's and fla's kernels: the state stays FP32 in registers across the rows of one op;
//          each row's output reads that FP32 state and only the stores round to FP16.
enum class F16Rows { stored, carried };

// The numerics conventions of a layer: the contract's by default; an implementation that computes
// otherwise declares it (plug-in flags, Python attributes) and is checked on a model that does too.
struct Numerics {
  GateMath gates = GateMath::clamped;
  F16Store f16_store = F16Store::saturate;
  F16Rows f16_rows = F16Rows::stored;
  bool is_contract() const {
    return gates == GateMath::clamped && f16_store == F16Store::saturate && f16_rows == F16Rows::stored;
  }
  std::string flags() const;        // " --gates torch --f16-store inf --f16-rows carried": what differs
  std::string name_suffix() const;  // ",gates=torch,f16_store=inf,f16_rows=carried": what differs
  bool operator==(const Numerics& o) const {
    return gates == o.gates && f16_store == o.f16_store && f16_rows == o.f16_rows;
  }
};

const char* to_string(LayerKind k);
const char* to_string(OutputGate g);
const char* to_string(GateMath g);
const char* to_string(F16Store f);
const char* to_string(F16Rows r);
F16Rows parse_f16_rows(const std::string& s);  // "stored" / "carried"; throws std::invalid_argument
GateMath parse_gate_math(const std::string& s);  // "clamped" / "torch"; throws std::invalid_argument
F16Store parse_f16_store(const std::string& s);  // "saturate" / "inf"; throws std::invalid_argument

constexpr int kMaxHeads = 65536;  // nk, nv (LayerSpec::validate; the file readers use the same bound)

struct LayerSpec {
  LayerKind kind = LayerKind::gdn;
  // GDN
  int nk = 1, nv = 1, kd = 8, vd = 8;
  int d_conv = 4;
  bool conv_bias = false;
  OutputGate output_gate = OutputGate::silu;
  Numerics numerics;  // the contract's unless the implementation checked declares otherwise
  float eps = 1e-6f;  // rms_norm_eps of the output norm
  // Mamba-2 (reserved; no transitions implemented yet)
  int nh = 0, hp = 0, ns = 0, ng = 0;

  int heads_per_key() const { return nv / nk; }   // value head vh reads key head vh / heads_per_key
  int conv_dim() const { return 2 * nk * kd + nv * vd; }  // channels [Q | K | V]
  int64_t h_elems() const { return int64_t(nv) * kd * vd; }  // [nv][kd][vd], vd fastest
  int64_t conv_elems() const { return int64_t(conv_dim()) * d_conv; }  // [conv_dim][d_conv]
  int out_dim() const { return nv * vd; }
  // Printable identity, e.g. "gdn(nk=2,nv=4,kd=32,vd=48,d_conv=4)"; also a filter key.
  std::string name() const;
  // Throws std::invalid_argument naming the offending field.
  void validate() const;
};

struct ModelSpec {
  std::string name;
  std::vector<LayerSpec> layers;  // recurrent layers only, in model order
  // Where the shapes came from: "preset NAME", "config.json PATH" (fixtures/hf_config.h), or ""
  // (built by hand, or read from a file that did not record it). Traces and dumps keep it.
  std::string source = {};
};

// Presets: "qwen3-next-80b" (36 GDN layers), "qwen3.6-27b", "tiny", "odd-a", "odd-b", "odd-c",
// "odd-d". layers > 0 keeps only the first `layers` recurrent layers (keeps big shapes cheap).
ModelSpec make_preset(const std::string& name, int layers = 0);
std::vector<std::string> preset_names();

}  // namespace ssm
