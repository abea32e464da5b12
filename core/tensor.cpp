// Host tensors (see tensor.h).
#include "core/tensor.h"

#include <cstring>
#include <stdexcept>

namespace ssm {

const char* to_string(DType d) { return d == DType::f32 ? "f32" : "f16"; }

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.size_ = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative tensor dimension");
    t.size_ *= d;
  }
  t.shape_ = std::move(shape);
  if (dtype == DType::f32) t.f32_.assign(size_t(t.size_), 0.0f);
  else t.f16_.assign(size_t(t.size_), uint16_t(0));
  return t;
}

bool Tensor::bit_equal(const Tensor& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ && std::memcmp(raw(), o.raw(), bytes()) == 0;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "] " + to_string(dtype_);
}

}  // namespace ssm
