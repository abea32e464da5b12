// Model/pool/input validation and printing (see model.h).
#include "core/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace ssm {

const char* to_string(HMode m) {
  switch (m) {
    case HMode::f32: return "f32";
    case HMode::f16: return "f16";
    case HMode::f16_pool: return "f16-pool";
  }
  return "?";
}

HMode parse_h_mode(const std::string& s) {
  if (s == "f32") return HMode::f32;
  if (s == "f16") return HMode::f16;
  if (s == "f16-pool" || s == "f16_pool") return HMode::f16_pool;
  throw std::invalid_argument("unknown h mode '" + s + "' (expected f32, f16 or f16-pool)");
}

namespace {
// Every member of LayerWeights and LayerRows by its C++ name (which of them a kind has:
// LayerSpec::weights() and inputs()).
const std::pair<const char*, std::vector<float> LayerWeights::*> kWeightMembers[] = {
    {"conv_w", &LayerWeights::conv_w}, {"conv_bias", &LayerWeights::conv_bias}, {"A_log", &LayerWeights::A_log},
    {"dt_bias", &LayerWeights::dt_bias}, {"D", &LayerWeights::D}, {"norm_w", &LayerWeights::norm_w},
    {"ple_w", &LayerWeights::ple_w}};
const std::pair<const char*, std::vector<float> LayerRows::*> kInputMembers[] = {{"x", &LayerRows::conv_in},
                                                                                 {"a", &LayerRows::dt_in},
                                                                                 {"b", &LayerRows::beta_in},
                                                                                 {"z", &LayerRows::gate_in},
                                                                                 {"ple_tokens", &LayerRows::ple_tokens},
                                                                                 {"ple_x", &LayerRows::ple_x}};

void check_vec(const std::vector<float>& v, size_t n, const std::string& where) {
  if (v.size() != n)
    throw std::invalid_argument(where + ": expected " + std::to_string(n) + " values, got " +
                                std::to_string(v.size()));
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw std::invalid_argument(where + ": non-finite value " + std::to_string(v[i]) +
                                  " at element " + std::to_string(i));
}
}  // namespace

void Model::validate() const {
  if (spec.layers.empty()) throw std::invalid_argument("model " + spec.name + " has no layers");
  if (weights.size() != spec.layers.size())
    throw std::invalid_argument("model " + spec.name + ": " + std::to_string(weights.size()) +
                                " weight sets for " + std::to_string(spec.layers.size()) + " layers");
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    s.validate();
    const LayerWeights& w = weights[l];
    const std::string at = "layer " + std::to_string(l) + " weight ";
    const std::vector<WeightField> fields = s.weights();
    for (const auto& [name, member] : kWeightMembers)  // a weight the layer does not have is empty
      if (std::none_of(fields.begin(), fields.end(), [m = member](const WeightField& f) { return f.member == m; }))
        check_vec(w.*member, 0, at + name + " (this layer has none)");
    for (const WeightField& f : fields) {
      size_t n = 1;
      for (int64_t d : f.shape) n *= size_t(d);
      check_vec(w.*f.member, n, at + f.name);
    }
  }
}

int PoolConfig::capacity(int slot) const {
  if (slot == max_slots) return max_capacity();
  return h_capacity.empty() ? conv_capacity : h_capacity.at(size_t(slot));
}

int PoolConfig::max_capacity() const {
  int m = h_capacity.empty() ? conv_capacity : 0;
  for (int c : h_capacity) m = std::max(m, c);
  return m;
}

void PoolConfig::validate() const {
  if (max_slots < 1 || max_slots > kMaxPoolSlots)
    throw std::invalid_argument("pool: max_slots must be in 1.." + std::to_string(kMaxPoolSlots) + ", not " +
                                std::to_string(max_slots));
  if (!h_capacity.empty() && h_capacity.size() != size_t(max_slots))
    throw std::invalid_argument("pool: h_capacity has " + std::to_string(h_capacity.size()) +
                                " entries for " + std::to_string(max_slots) + " slots");
  for (int c : h_capacity)
    if (c < 0 || c > kMaxIntermediates)
      throw std::invalid_argument("pool: h intermediate capacity " + std::to_string(c) + " is outside 0.." +
                                  std::to_string(kMaxIntermediates));
  if (conv_capacity < 0 || conv_capacity > kMaxIntermediates)
    throw std::invalid_argument("pool: conv intermediate capacity " + std::to_string(conv_capacity) +
                                " is outside 0.." + std::to_string(kMaxIntermediates));
  if (snapshot_slots < 0 || snapshot_slots > kMaxPoolSlots)
    throw std::invalid_argument("pool: snapshot_slots " + std::to_string(snapshot_slots) + " is outside 0.." +
                                std::to_string(kMaxPoolSlots));
}

std::string PoolConfig::name() const {
  std::string caps;
  for (int s = 0; s < max_slots; ++s) caps += (s ? "," : "") + std::to_string(capacity(s));
  return std::string("pool(h=") + to_string(h_mode) + ",slots=" + std::to_string(max_slots) +
         ",cap=[" + caps + "],conv_cap=" + std::to_string(conv_capacity) +
         ",snap=" + std::to_string(snapshot_slots) + ")";
}

void check_input_size(const ModelSpec& spec, int rows) {
  int64_t per_row = 0;
  for (const LayerSpec& s : spec.layers) per_row += s.input_floats_per_row();
  const double floats = double(std::max(rows, 0)) * double(per_row);
  if (floats > double(kMaxInputFloats))
    throw std::invalid_argument("inputs of " + std::to_string(rows) + " rows: " + std::to_string(int64_t(floats)) +
                                " floats (" + std::to_string(int64_t(floats * 4 / double(1 << 30))) +
                                " GiB), more than ssmcheck builds for one sequence of one op (" +
                                std::to_string(kMaxInputFloats * 4 / (1 << 30)) + " GiB)");
}

StepInputs StepInputs::zeros(const ModelSpec& spec, int rows) {
  check_input_size(spec, rows);
  StepInputs in;
  in.rows = rows;
  for (const LayerSpec& s : spec.layers) {
    LayerRows r;
    for (const InputField& f : s.inputs()) (r.*f.member).assign(size_t(std::max(rows, 0)) * size_t(f.width), 0.0f);
    in.layers.push_back(std::move(r));
  }
  return in;
}

StepInputs StepInputs::slice(const ModelSpec& spec, int begin, int count) const {
  StepInputs out;
  out.rows = count;
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerRows o;
    for (const InputField& f : spec.layers[l].inputs()) {
      const std::vector<float>& v = layers[l].*f.member;
      (o.*f.member).assign(v.begin() + long(begin) * f.width, v.begin() + long(begin + count) * f.width);
    }
    out.layers.push_back(std::move(o));
  }
  return out;
}

void StepInputs::validate(const ModelSpec& spec, int expected_rows) const {
  if (rows != expected_rows)
    throw std::invalid_argument("inputs: " + std::to_string(rows) + " rows given, " +
                                std::to_string(expected_rows) + " expected");
  if (layers.size() != spec.layers.size())
    throw std::invalid_argument("inputs: " + std::to_string(layers.size()) + " layers given, " +
                                std::to_string(spec.layers.size()) + " expected");
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    const std::string at = "input layer " + std::to_string(l) + " ";
    const size_t r = size_t(rows);
    const std::vector<InputField> fields = s.inputs();
    for (const auto& [name, member] : kInputMembers)  // an input the layer does not have is empty
      if (std::none_of(fields.begin(), fields.end(), [m = member](const InputField& f) { return f.member == m; }))
        check_vec(layers[l].*member, 0, at + name + " (this layer has none)");
    for (const InputField& f : fields) check_vec(layers[l].*f.member, r * size_t(f.width), at + f.name);
  }
  check_ple_tokens(spec, *this);
}

void check_ple_tokens(const ModelSpec& spec, const StepInputs& in) {
  const std::vector<float>* first = nullptr;
  size_t first_layer = 0;
  for (size_t l = 0; l < in.layers.size() && l < spec.layers.size(); ++l) {
    if (!spec.layers[l].ple.hosted()) continue;
    const std::vector<float>& ids = in.layers[l].ple_tokens;
    check_token_ids(ids.data(), ids.size(), "input layer " + std::to_string(l) + " ple_tokens");
    if (!first) {
      first = &ids;
      first_layer = l;
      continue;
    }
    for (size_t i = 0; i < ids.size() && i < first->size(); ++i)
      if (ids[i] != (*first)[i])
        throw std::invalid_argument("input layer " + std::to_string(l) + " ple_tokens: row " + std::to_string(i) +
                                    " holds " + std::to_string(int64_t(ids[i])) + ", layer " +
                                    std::to_string(first_layer) + " " + std::to_string(int64_t((*first)[i])) +
                                    " (a row has one token, the same on every layer hosting a PLE carry)");
  }
}

void check_token_ids(const float* ids, size_t n, const std::string& where) {
  for (size_t i = 0; i < n; ++i)
    if (!(ids[i] >= 0.0f && ids[i] <= float(kMaxTokenId) && ids[i] == std::floor(ids[i])))
      throw std::invalid_argument(where + ": row " + std::to_string(i) + " holds " + std::to_string(ids[i]) +
                                  ", not a token id (an integer in 0.." + std::to_string(kMaxTokenId) + ")");
}

}  // namespace ssm
