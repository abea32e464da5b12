// A model to run (layer specs + weights), the pool configuration, and per-token inputs/outputs.
// Inputs and weights are FP32 values (generators round them to BF16-representable values).
#pragma once
#include <string>
#include <vector>

#include "core/layer_spec.h"

namespace ssm {

// f32: FP32 h. f16: FP32-sized pool, h converted by to_f16 on the first decode step.
// f16_pool: FP16-sized pool, h_is_f16 from alloc, prefill through an FP32 staging blob.
enum class HMode { f32, f16, f16_pool };
const char* to_string(HMode m);  // "f32", "f16", "f16-pool"
HMode parse_h_mode(const std::string& s);

// Weights of one layer; which ones a kind has, and their shapes: LayerSpec::weights().
struct LayerWeights {
  std::vector<float> conv_w;     // [conv_dim][d_conv]
  std::vector<float> conv_bias;  // [conv_dim], empty when the layer has none
  std::vector<float> A_log;      // [nv] (GDN), [nh] (Mamba-2)
  std::vector<float> dt_bias;    // [nv], [nh]
  std::vector<float> D;          // Mamba-2 [nh]: the skip y += D x; empty for GDN
  std::vector<float> norm_w;     // [vd] (GDN: per value head), [nh*hp] (Mamba-2: per channel)
  std::vector<float> ple_w;      // [C][k_size] the PLE conv's taps; empty unless the layer hosts a PLE carry
};

struct Model {
  ModelSpec spec;
  std::vector<LayerWeights> weights;  // one per layer
  // Throws std::invalid_argument naming layer and field for wrong sizes or non-finite values.
  void validate() const;
};

// Bounds of a pool (PoolConfig::validate), shared by the file readers and the capture ABI so
// that nothing one accepts the other refuses.
constexpr int kMaxPoolSlots = 65536;      // max_slots and snapshot_slots
constexpr int kMaxIntermediates = 65536;  // h capacity per slot, conv capacity, last verify K

struct PoolConfig {
  HMode h_mode = HMode::f32;
  int max_slots = 4;
  std::vector<int> h_capacity;  // per slot: h intermediates it holds; empty = conv_capacity for all
  int conv_capacity = 4;        // conv intermediates per slot (uniform)
  int snapshot_slots = 2;       // prefix-cache snapshot slots of the pool
  int capacity(int slot) const;  // slot == max_slots (dummy) has the largest capacity
  int max_capacity() const;
  void validate() const;
  std::string name() const;  // "pool(h=f16-pool,slots=4,cap=[4,4,2,2],conv_cap=4,snap=2)"
};

// Inputs of `rows` consecutive tokens of one sequence, per layer; which ones a kind has, their
// names and widths: LayerSpec::inputs().
struct LayerRows {
  // The raw inputs, each before its activation; in parentheses the names on disk (traces, dumps)
  // and in the C ABIs, which stay short.
  std::vector<float> conv_in;  // [rows][conv_dim] pre-conv projection: GDN [Q|K|V] ("x"), Mamba-2 [x|B|C] ("xBC")
  std::vector<float> dt_in;    // [rows][nv] GDN ("a"), [rows][nh] Mamba-2 ("dt"): dt before dt_bias and softplus
  std::vector<float> beta_in;  // [rows][nv] GDN ("b"): beta before the sigmoid; empty for Mamba-2
  std::vector<float> gate_in;  // [rows][out_dim] the output gate ("z")
  // A layer hosting a PLE carry (LayerSpec::ple): empty otherwise.
  std::vector<float> ple_tokens;  // [rows] token ids, integers in [0, kMaxTokenId] held exactly in FP32
  std::vector<float> ple_x;       // [rows][C] the PLE rows (the n-gram embedding looked up for the token)
};
// Inputs ssmcheck builds for one sequence of one op are bounded (1 GiB of floats): a script or
// a trace asking for more (`prefill 300000000`) is an error naming the size before anything is
// allocated, never std::bad_alloc. Throws std::invalid_argument.
constexpr int64_t kMaxInputFloats = int64_t(1) << 28;
void check_input_size(const ModelSpec& spec, int rows);

// Throws std::invalid_argument naming `where` and the row of the first of the n values that is not
// a token id.
void check_token_ids(const float* ids, size_t n, const std::string& where);
struct StepInputs;
// The token ids of every layer hosting a PLE carry: token ids, and the same on every such layer
// (a row has one token). Throws std::invalid_argument naming the layer and row.
void check_ple_tokens(const ModelSpec& spec, const StepInputs& in);

struct StepInputs {
  int rows = 0;
  std::vector<LayerRows> layers;
  // Every input of every layer zero (the inputs of a padding row nobody recorded).
  static StepInputs zeros(const ModelSpec& spec, int rows);
  // Rows [begin, begin + count) of every input of every layer (LayerSpec::inputs()).
  StepInputs slice(const ModelSpec& spec, int begin, int count) const;
  // Throws std::invalid_argument naming layer, field, row and element for wrong sizes or NaN/Inf.
  void validate(const ModelSpec& spec, int expected_rows) const;
};

// Outputs of `rows` tokens, per layer: [rows][nv*vd].
struct StepOutputs {
  int rows = 0;
  std::vector<std::vector<float>> layers;
  // Per layer [rows][C]: the PLE output x + silu(y) of a layer hosting a PLE carry, empty for the
  // others. Empty (no entries at all) when the producer recorded none (a trace written before PLE).
  std::vector<std::vector<float>> ple;
  std::vector<std::vector<float>> ple_condition;  // optional, as `condition`, for `ple`
  // Optional, per layer [rows][nv*vd]: the output's condition, the first-order bound on how far
  // an FP32 implementation's output element may move per unit roundoff of its inputs (a
  // reference computes it alongside the value; compare/ scales it by the class's `cond`).
  // Empty when the producer does not compute it (backends under test, traces).
  std::vector<std::vector<float>> condition;
};

}  // namespace ssm

#include <ostream>
namespace ssm {
// gtest and logs print modes by name
inline std::ostream& operator<<(std::ostream& os, HMode m) { return os << to_string(m); }
}  // namespace ssm
