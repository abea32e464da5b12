// An engine's per-layer conventions by name, and its state layouts to the contract's (see conventions.h).
#include "core/conventions.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

namespace ssm {

const char* to_string(ConvWindow w) { return w == ConvWindow::d_conv ? "d_conv" : "d_conv-1"; }
const char* to_string(HLayout l) { return l == HLayout::kd_vd ? "nv,kd,vd" : "nv,vd,kd"; }

namespace {
template <class E>
E parse_one_of(const std::string& s, const char* what, const char* a, E ea, const char* b, E eb) {
  if (s == a) return ea;
  if (s == b) return eb;
  throw std::invalid_argument(std::string(what) + " '" + s + "': expected " + a + " or " + b);
}
}  // namespace

ConvWindow parse_conv_window(const std::string& s) {
  return parse_one_of(s, "conv_window", "d_conv", ConvWindow::d_conv, "d_conv-1", ConvWindow::d_conv_minus_1);
}
HLayout parse_h_layout(const std::string& s) {
  return parse_one_of(s, "h_layout", "nv,kd,vd", HLayout::kd_vd, "nv,vd,kd", HLayout::vd_kd);
}

const std::vector<std::string>& convention_names() {
  static const std::vector<std::string> names = {"gates",       "f16_store", "f16_rows",
                                                 "conv_window", "h_layout",  "norm_groups"};
  return names;
}

bool near_miss(const std::string& a, const std::string& b) {
  if (a.size() > 64 || b.size() > 64) return false;
  const auto low = [](char c) { return char(std::tolower(static_cast<unsigned char>(c))); };
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (low(a[i - 1]) == low(b[j - 1]) ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()] <= 2;
}

void set_convention(LayerSpec& layer, StateLayout& layout, const std::string& name, const std::string& value) {
  Numerics& numerics = layer.numerics;
  if (name == "norm_groups") {
    if (value.empty() || value.size() > 6 || value.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("norm_groups '" + value + "': expected an integer (0: ng, 1: the whole width)");
    layer.norm_groups = std::stoi(value);
  } else if (name == "gates") numerics.gates = parse_gate_math(value);
  else if (name == "f16_store") numerics.f16_store = parse_f16_store(value);
  else if (name == "f16_rows") numerics.f16_rows = parse_f16_rows(value);
  else if (name == "conv_window") layout.conv_window = parse_conv_window(value);
  else if (name == "h_layout") layout.h_layout = parse_h_layout(value);
  else {
    std::string known, near;
    for (const std::string& n : convention_names()) {
      known += (known.empty() ? "" : ", ") + n;
      if (near.empty() && near_miss(name, n)) near = n;
    }
    throw std::invalid_argument("unknown convention '" + name + "' (known: " + known + ")" +
                                (near.empty() ? "" : "; did you mean " + near + "?"));
  }
}

std::vector<int64_t> h_shape_in(const LayerSpec& s, const StateLayout& layout) {
  std::vector<int64_t> d = s.h_shape();  // [A][B][C]; swapped: [A][C][B]
  if (layout.h_layout == HLayout::vd_kd) std::swap(d[1], d[2]);
  return d;
}

std::vector<int64_t> conv_shape_in(const LayerSpec& s, const StateLayout& layout) {
  return {s.conv_dim(), s.d_conv - (layout.conv_window == ConvWindow::d_conv_minus_1 ? 1 : 0)};
}

namespace {
std::string dims(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "][" : "") + std::to_string(d[i]);
  return s + "]";
}
void check_shape(const Tensor& t, const std::vector<int64_t>& want, const char* what) {
  if (t.shape() != want)
    throw std::invalid_argument(std::string(what) + " " + dims(t.shape()) + ", expected " + dims(want));
}
}  // namespace

Tensor h_to_contract(Tensor t, const LayerSpec& s, const StateLayout& layout) {
  check_shape(t, h_shape_in(s, layout), "h");
  if (layout.h_layout == HLayout::kd_vd) return t;
  const std::vector<int64_t> d = s.h_shape();  // [A][B][C] from the engine's [A][C][B]
  Tensor out = Tensor::zeros(t.dtype(), d);
  const size_t e = dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t h = 0; h < d[0]; ++h)
    for (int64_t i = 0; i < d[1]; ++i)
      for (int64_t j = 0; j < d[2]; ++j)
        std::memcpy(dst + size_t((h * d[1] + i) * d[2] + j) * e, src + size_t((h * d[2] + j) * d[1] + i) * e, e);
  return out;
}

Tensor conv_to_contract(Tensor t, const LayerSpec& s, const StateLayout& layout) {
  check_shape(t, conv_shape_in(s, layout), "conv");
  if (layout.conv_window == ConvWindow::d_conv) return t;
  Tensor out = Tensor::zeros(DType::f32, {s.conv_dim(), s.d_conv});  // column 0: not kept, not compared
  const int D = s.d_conv;
  for (int c = 0; c < s.conv_dim(); ++c)
    std::copy(t.f32() + size_t(c) * size_t(D - 1), t.f32() + size_t(c + 1) * size_t(D - 1),
              out.f32() + size_t(c) * D + 1);
  return out;
}

}  // namespace ssm
