// Activation tensors: dense, row-major buffers owned by a backend's workspace.
//
// A Tensor is a non-owning handle (pointer, dtype, shape). On the CPU backend the
// pointer is host memory; model code never dereferences it (it hands tensors to
// backend ops), so the same model code runs on a device backend.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace dsv4 {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::array<int64_t, 4> shape{0, 0, 0, 0};
  int ndim = 0;

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
    DSV4_CHECK(dims.size() >= 1 && dims.size() <= 4, "Tensor: 1 to 4 dimensions, got ", dims.size());
    for (int64_t x : dims) shape[size_t(ndim++)] = x;
  }

  bool empty() const { return data == nullptr || numel() == 0; }
  int64_t dim(int i) const { return shape[size_t(i < 0 ? ndim + i : i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[size_t(i)];
    return ndim ? n : 0;
  }
  int64_t rows() const { return ndim ? numel() / shape[size_t(ndim - 1)] : 0; }  // all but the last dim
  int64_t cols() const { return ndim ? shape[size_t(ndim - 1)] : 0; }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }

  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }

  // Same memory, another shape with the same element count.
  Tensor reshape(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    DSV4_CHECK(t.numel() == numel(), "Tensor::reshape: ", numel(), " elements cannot take shape ", t.shape_string());
    return t;
  }
  // Rows [begin, end) of the first dimension.
  Tensor slice(int64_t begin, int64_t end) const {
    Tensor t = *this;
    const int64_t row_elems = numel() / shape[0];
    t.data = static_cast<uint8_t*>(data) + size_t(begin * row_elems) * dtype_size(dtype);
    t.shape[0] = end - begin;
    return t;
  }
  std::string shape_string() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[size_t(i)]);
    return s + "]";
  }
};

}  // namespace dsv4
