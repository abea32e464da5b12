// Presets and printing for layer specs (see layer_spec.h).
#include "core/layer_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ssm {

const char* to_string(LayerKind k) { return k == LayerKind::gdn ? "gdn" : "mamba2"; }

namespace {
std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}
}  // namespace
const char* to_string(OutputGate g) { return g == OutputGate::silu ? "silu" : "sigmoid"; }
const char* to_string(GateMath g) { return g == GateMath::clamped ? "clamped" : "torch"; }

const char* to_string(F16Store f) { return f == F16Store::saturate ? "saturate" : "inf"; }
const char* to_string(F16Rows r) { return r == F16Rows::stored ? "stored" : "carried"; }

namespace {

// s among two names, or std::invalid_argument "WHAT 'S': expected A or B".
template <class E>
E parse_choice(const std::string& s, const char* what, std::pair<const char*, E> a, std::pair<const char*, E> b) {
  if (s == a.first) return a.second;
  if (s == b.first) return b.second;
  throw std::invalid_argument(std::string(what) + " '" + s + "': expected " + a.first + " or " + b.first);
}

// The numerics fields that are not the contract's: flag name ("f16-store") and value ("inf").
std::vector<std::pair<std::string, std::string>> differences(const Numerics& n) {
  std::vector<std::pair<std::string, std::string>> d;
  if (n.gates != GateMath::clamped) d.emplace_back("gates", to_string(n.gates));
  if (n.f16_store != F16Store::saturate) d.emplace_back("f16-store", to_string(n.f16_store));
  if (n.f16_rows != F16Rows::stored) d.emplace_back("f16-rows", to_string(n.f16_rows));
  return d;
}

}  // namespace

LayerKind parse_layer_kind(const std::string& s) {
  return parse_choice(s, "layer kind", std::pair{"gdn", LayerKind::gdn}, std::pair{"mamba2", LayerKind::mamba2});
}

GateMath parse_gate_math(const std::string& s) {
  return parse_choice(s, "gates", std::pair{"clamped", GateMath::clamped}, std::pair{"torch", GateMath::torch});
}
F16Store parse_f16_store(const std::string& s) {
  return parse_choice(s, "f16 store", std::pair{"saturate", F16Store::saturate}, std::pair{"inf", F16Store::inf});
}
F16Rows parse_f16_rows(const std::string& s) {
  return parse_choice(s, "f16 rows", std::pair{"stored", F16Rows::stored}, std::pair{"carried", F16Rows::carried});
}

std::string Numerics::flags() const {
  std::string s;
  for (const auto& [flag, value] : differences(*this)) s += " --" + flag + " " + value;
  return s;
}

std::string Numerics::name_suffix() const {
  std::string s;
  for (auto [flag, value] : differences(*this)) {
    std::replace(flag.begin(), flag.end(), '-', '_');  // the attribute's name: f16_store
    s += "," + flag + "=" + value;
  }
  return s;
}

std::string LayerSpec::name() const {
  std::string s;
  if (kind == LayerKind::mamba2) {
    s = "mamba2(nh=" + std::to_string(nh) + ",hp=" + std::to_string(hp) + ",ns=" + std::to_string(ns) +
        ",ng=" + std::to_string(ng) + ",d_conv=" + std::to_string(d_conv);
    if (!conv_bias) s += ",no_bias";
    if (norm_before_gate) s += ",norm_before_gate";
    if (norm_group_count() != ng) s += ",norm_groups=" + std::to_string(norm_group_count());
    if (dt_min != 0.0f || !std::isinf(dt_max)) s += ",dt=[" + fmt_float(dt_min) + "," + fmt_float(dt_max) + "]";
  } else {
    s = "gdn(nk=" + std::to_string(nk) + ",nv=" + std::to_string(nv) + ",kd=" + std::to_string(kd) +
        ",vd=" + std::to_string(vd) + ",d_conv=" + std::to_string(d_conv);
    if (conv_bias) s += ",bias";
    if (output_gate != OutputGate::silu) s += std::string(",gate=") + to_string(output_gate);
    if (ple.hosted())
      s += ",ple=" + std::to_string(ple.channels) + "x" + std::to_string(ple.k_size) + "/" +
           std::to_string(ple.dilation) + ",ngram=" + std::to_string(ple.ngram_size) + ",eos=" +
           std::to_string(ple.eos_id);
  }
  s += numerics.name_suffix();
  return s + ")";
}

std::string ModelSpec::layers_text() const {
  const bool uniform =
      std::all_of(layers.begin(), layers.end(), [&](const LayerSpec& l) { return l.name() == layers[0].name(); });
  std::string s = std::to_string(layers.size()) + " layers" + (uniform ? " of " : ": ");
  for (size_t l = 0; l < (uniform ? std::min<size_t>(layers.size(), 1) : layers.size()); ++l)
    s += (l ? ", " : "") + layers[l].name();
  return s;
}

bool ModelSpec::hosts_ple() const {
  return std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.ple.hosted(); });
}

void LayerSpec::validate() const {
  auto bad = [&](const std::string& what) { throw std::invalid_argument(name() + ": " + what); };
  if (kind == LayerKind::gdn) {
    if (nk < 1 || nv < 1 || kd < 1 || vd < 1) bad("nk, nv, kd, vd must be >= 1");
    if (nk > kMaxHeads || nv > kMaxHeads) bad("nk and nv must be <= " + std::to_string(kMaxHeads));
    if (nv % nk != 0) bad("nv must be a multiple of nk");
    if (kd > kMaxHeadDim || vd > kMaxHeadDim) bad("kd and vd must be <= " + std::to_string(kMaxHeadDim));
  } else if (kind == LayerKind::mamba2) {
    if (nh < 1 || hp < 1 || ns < 1 || ng < 1) bad("nh, hp, ns, ng must be >= 1");
    if (nh > kMaxHeads || ng > kMaxHeads) bad("nh and ng must be <= " + std::to_string(kMaxHeads));
    if (nh % ng != 0) bad("nh must be a multiple of ng");
    if (hp > kMaxHeadDim || ns > kMaxHeadDim) bad("hp and ns must be <= " + std::to_string(kMaxHeadDim));
    if (!(dt_min >= 0.0f) || !(dt_max > dt_min) || std::isnan(dt_max)) bad("dt limits must satisfy 0 <= dt_min < dt_max");
    if (norm_groups < 0 || norm_groups > kMaxHeads || (norm_groups > 0 && d_inner() % norm_groups != 0))
      bad("norm_groups must divide nh*hp (0: ng)");
  } else {
    bad("unknown layer kind");
  }
  if (kind != LayerKind::mamba2 && norm_groups != 0) bad("norm_groups is a Mamba-2 layer's");
  if (d_conv < 1 || d_conv > 8) bad("d_conv must be in 1..8");
  if (ple.channels < 0) bad("ple channels must be >= 0");
  if (ple.hosted()) {
    if (kind != LayerKind::gdn) bad("only GDN layers host a PLE carry (STATE-MODEL section 7)");
    if (ple.channels > kMaxPleChannels) bad("ple channels must be <= " + std::to_string(kMaxPleChannels));
    if (ple.ngram_size < 2 || ple.ngram_size > 16) bad("ple ngram_size must be in 2..16");
    if (ple.k_size < 1 || ple.k_size > 16) bad("ple k_size must be in 1..16");
    if (ple.dilation < 1 || ple.dilation > 16) bad("ple dilation must be in 1..16");
    if (ple.eos_id < 0 || ple.eos_id > kMaxTokenId) bad("ple eos_id must be in 0.." + std::to_string(kMaxTokenId));
  }
  if (!(eps > 0.0f) || !std::isfinite(eps)) bad("eps must be finite and > 0");
}

namespace {
// A Mamba-2 layer: conv bias on, dt limits (0, inf), Nemotron-H's eps and norm order.
LayerSpec mamba2(int nh, int hp, int ns, int ng, int d_conv = 4) {
  LayerSpec s;
  s.kind = LayerKind::mamba2;
  s.nh = nh; s.hp = hp; s.ns = ns; s.ng = ng; s.d_conv = d_conv;
  s.conv_bias = true;
  s.eps = 1e-5f;
  return s;
}
LayerSpec gdn(int nk, int nv, int kd, int vd, int d_conv, bool bias = false,
              OutputGate gate = OutputGate::silu) {
  LayerSpec s;
  s.nk = nk; s.nv = nv; s.kd = kd; s.vd = vd; s.d_conv = d_conv;
  s.conv_bias = bias; s.output_gate = gate;
  return s;
}
// `s` hosting a PLE carry of C channels.
LayerSpec with_ple(LayerSpec s, int channels, int ngram_size, int k_size, int dilation, int eos_id) {
  s.ple = PleSpec{channels, ngram_size, k_size, dilation, eos_id};
  return s;
}
ModelSpec repeat(const std::string& name, int n, const LayerSpec& s) {
  return ModelSpec{name, std::vector<LayerSpec>(size_t(n), s)};
}
}  // namespace

std::vector<std::string> preset_names() {
  return {"qwen3-next-80b", "qwen3.6-27b", "tiny", "odd-a", "odd-b", "odd-c", "odd-d", "odd-deep",
          "nemotron-h-8b", "mamba-tiny", "mamba-odd-a", "mamba-odd-b", "mamba-odd-c", "mamba-wide",
          "hybrid-odd", "ple-tiny", "ple-odd"};
}

ModelSpec make_preset(const std::string& name, int layers) {
  ModelSpec m;
  if (name == "qwen3-next-80b") {
    m = repeat(name, 36, gdn(16, 32, 128, 128, 4));  // 36 of 48 layers are GDN
  } else if (name == "qwen3.6-27b") {
    m = repeat(name, 48, gdn(16, 48, 128, 128, 4));  // 3 of every 4 layers of 64 are GDN
  } else if (name == "tiny") {
    m = repeat(name, 2, gdn(1, 2, 8, 12, 4));
  } else if (name == "odd-a") {  // non-power-of-two dims, conv bias, 3 value heads per key head
    m = repeat(name, 2, gdn(2, 6, 20, 24, 3, true));
  } else if (name == "odd-b") {  // kd > vd, prime-ish sizes, d_conv 2, sigmoid output gate
    m = repeat(name, 3, gdn(3, 3, 33, 17, 2, false, OutputGate::sigmoid));
  } else if (name == "odd-c") {  // the largest head dim the contract allows in tests
    m = repeat(name, 1, gdn(1, 4, 160, 9, 4));
  } else if (name == "odd-d") {  // mixed layer shapes in one model
    m.name = name;
    m.layers = {gdn(4, 8, 16, 40, 4), gdn(1, 1, 9, 13, 2, true), gdn(2, 8, 64, 64, 3)};
  } else if (name == "odd-deep") {  // 50 small layers: every per-launch list (copies, zeroing) spans launches
    m.name = name;
    for (int l = 0; l < 50; ++l) m.layers.push_back(l % 2 ? gdn(1, 1, 9, 13, 2, true) : gdn(1, 2, 8, 12, 4));
  } else if (name == "nemotron-h-8b") {  // 24 Mamba-2 layers; in_proj 18560 = 2*8192 + 2*8*128 + 128
    m = repeat(name, 24, mamba2(128, 64, 128, 8, 4));
  } else if (name == "mamba-tiny") {
    m = repeat(name, 2, mamba2(4, 8, 16, 2, 4));
  } else if (name == "mamba-odd-a") {  // ns not a multiple of 32, one group, odd head dim
    m = repeat(name, 2, mamba2(6, 12, 96, 1, 4));
    m.layers[1].dt_min = 0.001f;  // a model with dt limits (time_step_limit)
    m.layers[1].dt_max = 0.1f;
  } else if (name == "mamba-odd-b") {  // ng = nh, d_conv 3, norm before the gate, a layer without conv bias
    m.name = name;
    m.layers = {mamba2(5, 7, 33, 5, 3), mamba2(3, 20, 9, 1, 2)};
    m.layers[0].norm_before_gate = true;
    m.layers[1].conv_bias = false;
  } else if (name == "mamba-odd-c") {  // wide states: ns 256 (the contract's bound) and 164 (two column blocks
    m.name = name;                      // of the CUDA row kernel, the second partly masked); 201 and 97, not
                                        // multiples of 4 (its one-column-per-lane instances of 8 and 4 blocks)
    m.layers = {mamba2(3, 12, 256, 1, 4), mamba2(4, 9, 164, 2, 3), mamba2(2, 5, 201, 1, 2), mamba2(1, 7, 97, 1, 4)};
  } else if (name == "mamba-wide") {  // one group of 1280 channels: wider than a CUDA thread block holds;
    m.name = name;                     // layer 1: 1323 (nh*hp odd, so B and C rows are not 16-byte aligned)
    m.layers = {mamba2(20, 64, 16, 1, 4), mamba2(21, 63, 16, 1, 4)};
  } else if (name == "hybrid-odd") {  // GDN and Mamba-2 layers alternating: nothing assumes one kind per model
    m.name = name;
    m.layers = {gdn(2, 6, 20, 24, 3, true), mamba2(4, 10, 24, 2, 4), gdn(1, 1, 9, 13, 2, true), mamba2(6, 8, 17, 3, 3)};
  } else if (name == "ple-tiny") {  // the shipped PLE geometry (k_size 4, dilation 3: 9 conv rows) on layer 0
    m.name = name;
    m.layers = {with_ple(gdn(1, 2, 8, 12, 4), 8, 3, 4, 3, 2), gdn(1, 2, 8, 12, 4)};
  } else if (name == "ple-odd") {  // odd channel counts and geometries, a layer hosting none between two that do
    m.name = name;
    m.layers = {with_ple(gdn(2, 6, 20, 24, 3, true), 37, 4, 4, 3, 0), gdn(1, 1, 9, 13, 2, true),
                with_ple(gdn(1, 2, 8, 12, 4), 5, 2, 2, 5, 7)};
  } else {
    std::string known;
    for (const auto& p : preset_names()) known += (known.empty() ? "" : ", ") + p;
    throw std::invalid_argument("unknown preset '" + name + "' (known: " + known + ")");
  }
  if (layers > 0 && size_t(layers) < m.layers.size()) m.layers.resize(size_t(layers));
  if (layers < 0) throw std::invalid_argument("layers must be >= 0");
  for (const auto& l : m.layers) l.validate();
  m.source = "preset " + name;
  return m;
}

}  // namespace ssm
