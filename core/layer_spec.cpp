// Presets and printing for layer specs (see layer_spec.h).
#include "core/layer_spec.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ssm {

const char* to_string(LayerKind k) { return k == LayerKind::gdn ? "gdn" : "mamba2"; }
const char* to_string(OutputGate g) { return g == OutputGate::silu ? "silu" : "sigmoid"; }
const char* to_string(GateMath g) { return g == GateMath::clamped ? "clamped" : "torch"; }

const char* to_string(F16Store f) { return f == F16Store::saturate ? "saturate" : "inf"; }
const char* to_string(F16Rows r) { return r == F16Rows::stored ? "stored" : "carried"; }

F16Rows parse_f16_rows(const std::string& s) {
  if (s == "stored") return F16Rows::stored;
  if (s == "carried") return F16Rows::carried;
  throw std::invalid_argument("f16 rows '" + s + "': expected stored or carried");
}

std::string Numerics::flags() const {
  std::string s;
  if (gates != GateMath::clamped) s += std::string(" --gates ") + to_string(gates);
  if (f16_store != F16Store::saturate) s += std::string(" --f16-store ") + to_string(f16_store);
  if (f16_rows != F16Rows::stored) s += std::string(" --f16-rows ") + to_string(f16_rows);
  return s;
}

std::string Numerics::name_suffix() const {
  std::string s;
  if (gates != GateMath::clamped) s += std::string(",gates=") + to_string(gates);
  if (f16_store != F16Store::saturate) s += std::string(",f16_store=") + to_string(f16_store);
  if (f16_rows != F16Rows::stored) s += std::string(",f16_rows=") + to_string(f16_rows);
  return s;
}

F16Store parse_f16_store(const std::string& s) {
  if (s == "saturate") return F16Store::saturate;
  if (s == "inf") return F16Store::inf;
  throw std::invalid_argument("f16 store '" + s + "': expected saturate or inf");
}

GateMath parse_gate_math(const std::string& s) {
  if (s == "clamped") return GateMath::clamped;
  if (s == "torch") return GateMath::torch;
  throw std::invalid_argument("gates '" + s + "': expected clamped or torch");
}

std::string LayerSpec::name() const {
  if (kind == LayerKind::mamba2)
    return "mamba2(nh=" + std::to_string(nh) + ",hp=" + std::to_string(hp) + ",ns=" +
           std::to_string(ns) + ",ng=" + std::to_string(ng) + ",d_conv=" + std::to_string(d_conv) + ")";
  std::string s = "gdn(nk=" + std::to_string(nk) + ",nv=" + std::to_string(nv) + ",kd=" +
                  std::to_string(kd) + ",vd=" + std::to_string(vd) + ",d_conv=" + std::to_string(d_conv);
  if (conv_bias) s += ",bias";
  if (output_gate != OutputGate::silu) s += std::string(",gate=") + to_string(output_gate);
  s += numerics.name_suffix();
  return s + ")";
}

void LayerSpec::validate() const {
  auto bad = [&](const std::string& what) { throw std::invalid_argument(name() + ": " + what); };
  if (kind != LayerKind::gdn) bad("only gdn layers are implemented");
  if (nk < 1 || nv < 1 || kd < 1 || vd < 1) bad("nk, nv, kd, vd must be >= 1");
  if (nk > kMaxHeads || nv > kMaxHeads) bad("nk and nv must be <= " + std::to_string(kMaxHeads));
  if (nv % nk != 0) bad("nv must be a multiple of nk");
  if (d_conv < 1 || d_conv > 8) bad("d_conv must be in 1..8");
  if (kd > 256 || vd > 256) bad("kd and vd must be <= 256");
  if (!(eps > 0.0f) || !std::isfinite(eps)) bad("eps must be finite and > 0");
}

namespace {
LayerSpec gdn(int nk, int nv, int kd, int vd, int d_conv, bool bias = false,
              OutputGate gate = OutputGate::silu) {
  LayerSpec s;
  s.nk = nk; s.nv = nv; s.kd = kd; s.vd = vd; s.d_conv = d_conv;
  s.conv_bias = bias; s.output_gate = gate;
  return s;
}
ModelSpec repeat(const std::string& name, int n, const LayerSpec& s) {
  return ModelSpec{name, std::vector<LayerSpec>(size_t(n), s)};
}
}  // namespace

std::vector<std::string> preset_names() {
  return {"qwen3-next-80b", "qwen3.6-27b", "tiny", "odd-a", "odd-b", "odd-c", "odd-d", "odd-deep"};
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
