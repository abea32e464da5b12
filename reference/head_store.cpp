// reference/head_store.h
#include "reference/head_store.h"

#include "core/half.h"
#include "reference/branches.h"

namespace ssm::ref {

MatD load_head(const Tensor& h, int64_t base, int rows, int cols) {
  MatD H(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) H(i, j) = h.get(base + int64_t(i) * cols + j);
  return H;
}

MatD store_head(F16Store store, Tensor& h, int64_t base, const MatD& H) {
  MatD stored(H.rows(), H.cols());
  for (Eigen::Index i = 0; i < H.rows(); ++i)
    for (Eigen::Index j = 0; j < H.cols(); ++j) {
      const size_t e = size_t(base + int64_t(i) * H.cols() + j);
      const float f = float(H(i, j));
      if (h.dtype() == DType::f32) {
        h.f32()[e] = f;
        stored(i, j) = f;
      } else {
        h.f16()[e] = store == F16Store::saturate ? store_half(f) : store_half_inf(f);
        stored(i, j) = half_to_float(h.f16()[e]);
      }
    }
  return stored;
}

}  // namespace ssm::ref
