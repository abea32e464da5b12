// Host tensors: FP32 or FP16 (bits) storage with a shape, as exported by every backend.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"

namespace ssm {

enum class DType { f32, f16 };
const char* to_string(DType d);
inline size_t dtype_size(DType d) { return d == DType::f32 ? 4 : 2; }

class Tensor {
 public:
  Tensor() = default;
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  Tensor(const Tensor&) = default;
  Tensor& operator=(const Tensor&) = default;
  // A moved-from tensor is empty (no shape, size 0), never a size without storage: the export
  // updates take the storage of some fields and keep the rest (core/state_fields.h).
  Tensor(Tensor&& o) noexcept
      : dtype_(o.dtype_), shape_(std::move(o.shape_)), size_(std::exchange(o.size_, 0)), f32_(std::move(o.f32_)),
        f16_(std::move(o.f16_)) {
    o.shape_.clear();
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this == &o) return *this;
    dtype_ = o.dtype_;
    shape_ = std::move(o.shape_);
    size_ = std::exchange(o.size_, 0);
    f32_ = std::move(o.f32_);
    f16_ = std::move(o.f16_);
    o.shape_.clear();
    o.f32_.clear();
    o.f16_.clear();
    return *this;
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const { return size_; }
  size_t bytes() const { return size_t(size_) * dtype_size(dtype_); }
  bool empty() const { return size_ == 0; }

  // Element value widened to float (FP16 -> FP32 is exact).
  float get(int64_t i) const { return dtype_ == DType::f32 ? f32_[size_t(i)] : half_to_float(f16_[size_t(i)]); }
  float* f32() { return f32_.data(); }
  const float* f32() const { return f32_.data(); }
  uint16_t* f16() { return f16_.data(); }
  const uint16_t* f16() const { return f16_.data(); }
  void* raw() { return dtype_ == DType::f32 ? static_cast<void*>(f32_.data()) : f16_.data(); }
  const void* raw() const { return dtype_ == DType::f32 ? static_cast<const void*>(f32_.data()) : f16_.data(); }

  // Same dtype, shape and bits (NaN payloads included).
  bool bit_equal(const Tensor& o) const;
  std::string shape_string() const;  // "[32, 128, 128] f16"

 private:
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::vector<float> f32_;
  std::vector<uint16_t> f16_;
};

}  // namespace ssm
