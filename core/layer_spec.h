// Layer and model shapes (STATE-MODEL section 1) and the named presets.
// Counterparts: core/layer_spec.cpp (presets, printing).
#pragma once
#include <cstdint>
#include <limits>
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
LayerKind parse_layer_kind(const std::string& s);  // "gdn" / "mamba2"; throws std::invalid_argument
const char* to_string(OutputGate g);
const char* to_string(GateMath g);
const char* to_string(F16Store f);
const char* to_string(F16Rows r);
F16Rows parse_f16_rows(const std::string& s);  // "stored" / "carried"; throws std::invalid_argument
GateMath parse_gate_math(const std::string& s);  // "clamped" / "torch"; throws std::invalid_argument
F16Store parse_f16_store(const std::string& s);  // "saturate" / "inf"; throws std::invalid_argument

// Mamba-2's decay dA = exp(-exp(A_log) dt) never falls below the smallest positive FP32 subnormal,
// so an infinite state stays infinite in every precision (docs/state-model.md, "Mamba-2").
constexpr float kMamba2MinDecay = 0x1p-149f;
constexpr int kMaxHeads = 65536;  // nk, nv, nh (LayerSpec::validate; the file readers use the same bound)
constexpr int kMaxHeadDim = 256;  // kd, vd, hp, ns (LayerSpec::validate; cuda/mamba2_rows.cu takes every ns to it)

struct LayerRows;
struct LayerWeights;
struct LayerSpec;
struct StepOutputs;

// The per-layer n-gram embedding (PLE) carry a layer may host (STATE-MODEL section 7,
// docs/state-model.md "PLE carry"): the last ngram_size-1 token ids (EOS-filled at sequence start)
// and a dilated depthwise conv over C FP32 channels, whose state is the last (k_size-1)*dilation
// rows. channels == 0: the layer hosts none.
struct PleSpec {
  int channels = 0;    // C
  int ngram_size = 3;  // the history keeps ngram_size - 1 token ids
  int k_size = 4;      // conv taps; tap j reads the row (k_size-1-j)*dilation rows back
  int dilation = 3;
  int eos_id = 1;      // the token id the history starts filled with
  bool hosted() const { return channels > 0; }
  int history_len() const { return ngram_size - 1; }
  int conv_rows() const { return (k_size - 1) * dilation; }
  bool operator==(const PleSpec& o) const {
    return channels == o.channels && ngram_size == o.ngram_size && k_size == o.k_size && dilation == o.dilation &&
           eos_id == o.eos_id;
  }
};
// Token ids are integers in [0, kMaxTokenId]: every one is exact in FP32, the dtype token ids
// travel in (inputs, history, files).
constexpr int kMaxTokenId = (1 << 24) - 1;
constexpr int kMaxPleChannels = 1 << 20;

// A per-token input of a layer kind: its name in traces and captures, where LayerRows keeps it
// (core/model.h), and its width per token.
struct InputField {
  const char* name;
  std::vector<float> LayerRows::*member;
  int64_t width;
};
// A per-token output of a layer: its name in traces and the C ABIs, where StepOutputs keeps it
// (core/model.h: one vector per layer), and its width per token.
struct OutputField {
  const char* name;
  std::vector<std::vector<float>> StepOutputs::*member;
  int64_t width;
};
// An integer shape parameter of a layer kind by name (GDN nk, nv, kd, vd; Mamba-2 nh, hp, ns, ng),
// as files write them.
struct ShapeParam {
  const char* name;
  int LayerSpec::*member;
};
// A weight of a layer kind: its name in traces, where LayerWeights keeps it, and its shape.
struct WeightField {
  const char* name;
  std::vector<float> LayerWeights::*member;
  std::vector<int64_t> shape;
};

// A state field of a layer by name, as traces, dumps and both C ABIs name it, and its shape in the
// contract's layout: h, conv, their _checkpoint and _intermediate (one per t of the last verify),
// and on a layer hosting a PLE carry ple_history, ple_conv, their _checkpoint and _snapshot (one per
// t). `indexed`: one tensor per t.
struct StateField {
  const char* name;
  std::vector<int64_t> shape;
  bool indexed;
};

// One recurrent layer. Everything that depends on the kind (field shapes, inputs, weights, the
// output's shape) is answered by the methods below, implemented in one place
// (core/layer_geometry.cpp); code elsewhere iterates inputs() and weights() by name and switches
// on `kind` only where the math differs (one dispatch point per implementation).
struct LayerSpec {
  LayerKind kind = LayerKind::gdn;
  // GDN (STATE-MODEL section 3)
  int nk = 1, nv = 1, kd = 8, vd = 8;
  // Mamba-2: heads, head dim, state size, groups (head h reads group h / (nh / ng))
  int nh = 0, hp = 0, ns = 0, ng = 0;
  // Mamba-2's output stage normalises before multiplying by silu(z) (mamba_ssm's
  // norm_before_gate = True; Nemotron-H's is False)
  bool norm_before_gate = false;
  // Mamba-2's gated RMS norm groups: 0 means ng (Nemotron-H, mamba_ssm: groups of nh*hp/ng
  // channels); 1 normalises over the whole width (Hugging Face's Mamba2 model, whatever ng is).
  int norm_groups = 0;
  // Mamba-2's dt limits after softplus (the model's time_step_limit; (0, inf) clamps nothing)
  float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();
  // both kinds
  int d_conv = 4;
  bool conv_bias = false;  // Mamba-2 layers have one
  OutputGate output_gate = OutputGate::silu;  // GDN
  Numerics numerics;  // the contract's unless the implementation checked declares otherwise
  float eps = 1e-6f;  // rms_norm_eps of the output norm
  PleSpec ple;        // the PLE carry the layer hosts (GDN layers only); ple.channels == 0: none
  // A slip, never a convention: heads mapped tiled instead of grouped (GDN value head vh reads key
  // head vh % nk, Mamba-2 head h reads group h % ng). Set only on the reference that the
  // likely-cause rerun runs (fuzz/convention_hints.h); no file reads or writes it, nothing declares it.
  bool tiled_heads = false;

  int heads_per_key() const { return nv / nk; }   // GDN: value head vh reads key head vh / heads_per_key
  int heads_per_group() const { return nh / ng; }  // Mamba-2: head h reads group h / heads_per_group
  int key_head(int vh) const { return tiled_heads ? vh % nk : vh / heads_per_key(); }  // GDN
  int group_of(int h) const { return tiled_heads ? h % ng : h / heads_per_group(); }   // Mamba-2
  // tiled_heads changes something: GDN nv / nk > 1, Mamba-2 nh / ng > 1 with ng > 1
  bool tiling_differs() const { return kind == LayerKind::gdn ? nk > 1 && nv > nk : ng > 1 && nh > ng; }
  int d_inner() const { return nh * hp; }          // Mamba-2
  int norm_group_count() const { return norm_groups ? norm_groups : ng; }  // Mamba-2: groups of the output norm
  // conv channels: GDN 2*nk*kd + nv*vd ordered [Q | K | V]; Mamba-2 nh*hp + 2*ng*ns ordered [x | B | C]
  int conv_dim() const;
  std::vector<int64_t> h_shape() const;  // GDN [nv][kd][vd], vd fastest; Mamba-2 [nh][hp][ns], ns fastest
  std::string h_layout() const;          // that, as dumps and traces label h: "[nv][kd][vd], vd fastest"
  int64_t h_elems() const;
  int64_t conv_elems() const { return int64_t(conv_dim()) * d_conv; }  // [conv_dim][d_conv]
  // The output of one token, [out_heads][out_head_dim]: GDN [nv][vd], Mamba-2 [nh][hp].
  int out_heads() const;
  int out_head_dim() const;
  int out_dim() const { return out_heads() * out_head_dim(); }
  // Per-token inputs, in order (by their on-disk names; the LayerRows member in parentheses): GDN
  // x[conv_dim] (conv_in: pre-conv Q|K|V), a[nv] (dt_in), b[nv] (beta_in), z[nv*vd] (gate_in); Mamba-2
  // xBC[conv_dim] (conv_in: pre-conv x|B|C), dt[nh] (dt_in, before dt_bias), z[nh*hp] (gate_in); then, on
  // a layer hosting a PLE carry, ple_tokens[1] (the token id, an integer in FP32) and ple_x[C].
  std::vector<InputField> inputs() const;
  // Per-token outputs: out[out_dim], then on a layer hosting a PLE carry ple_out[C] (x + silu(y)).
  std::vector<OutputField> outputs() const;
  // Weights, in order: GDN conv_w, conv_bias (when the layer has one), A_log[nv], dt_bias[nv],
  // norm_w[vd]; Mamba-2 conv_w, conv_bias, A_log[nh], dt_bias[nh], D[nh], norm_w[nh*hp]; then,
  // on a layer hosting a PLE carry, ple_w[C][k_size].
  std::vector<WeightField> weights() const;
  std::vector<ShapeParam> shape_params() const;
  std::vector<StateField> state_fields() const;  // in export order
  int64_t input_floats_per_row() const;  // sum of the inputs' widths
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
  // "2 layers of gdn(...)", or for layers of several shapes "4 layers: gdn(...), mamba2(...), ...".
  std::string layers_text() const;
  bool hosts_ple() const;  // some layer hosts a PLE carry
};

// Presets: GDN "qwen3-next-80b" (36 layers), "qwen3.6-27b", "tiny", "odd-a", "odd-b", "odd-c",
// "odd-d", "odd-deep"; Mamba-2 "nemotron-h-8b" (24 layers), "mamba-tiny", "mamba-odd-a",
// "mamba-odd-b", "mamba-odd-c", "mamba-wide"; both kinds "hybrid-odd" (GDN and Mamba-2 layers
// alternating); GDN layers hosting PLE carries "ple-tiny", "ple-odd". layers > 0 keeps only the
// first `layers` recurrent layers (keeps big shapes cheap).
ModelSpec make_preset(const std::string& name, int layers = 0);
std::vector<std::string> preset_names();

}  // namespace ssm
