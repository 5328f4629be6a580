#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

CpuBackend::CpuBackend(int num_threads, CpuIsa isa)
    : isa_(cpu_features().has(isa) ? isa : default_isa()), pool_(num_threads), profile_(OpProfile::from_environment()),
      scratch_(size_t(pool_.size())) {}
CpuBackend::~CpuBackend() = default;

// Workspace and cache chunks: large ones on huge pages (backend/cpu/host_memory.h).
void* CpuBackend::allocate(size_t bytes) { return cpu::allocate_host(bytes); }

void CpuBackend::release(void* p) { cpu::release_host(p); }

float* CpuBackend::scratch(int worker, size_t floats) {
  auto& s = scratch_[size_t(worker)];
  if (s.size() < floats) s.resize(floats);
  return s.data();
}

void CpuBackend::to_host(const Tensor& t, void* dst) { std::memcpy(dst, t.data, t.nbytes()); }
void CpuBackend::from_host(Tensor& t, const void* src) { std::memcpy(t.data, src, t.nbytes()); }

void CpuBackend::gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) {
  ScopedOp op_scope(profile_.get(), "gather_rows");
  const size_t row_bytes = src.nbytes() / size_t(src.dim(0));
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<uint8_t*>(dst.data) + i * row_bytes,
                static_cast<const uint8_t*>(src.data) + size_t(rows[i]) * row_bytes, row_bytes);
}

void CpuBackend::store_rows(std::span<RowTable* const> tables, std::span<const int64_t> rows, const Tensor& src) {
  ScopedOp op_scope(profile_.get(), "store_rows");
  DSV4_CHECK(tables.size() == rows.size() && src.rows() == int64_t(rows.size()), "store_rows: ", tables.size(),
             " tables and ", rows.size(), " rows for a source of ", src.shape_string());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!tables[i]) continue;
    const RowTable& table = *tables[i];
    const int64_t width = table.pool().row_elems();
    DSV4_CHECK(src.cols() == width, "store_rows: source ", src.shape_string(), " does not match rows of ", width);
    const DType dt = table.pool().dtype();
    const float* s = src.f32() + int64_t(i) * width;
    uint8_t* d = table.row(rows[i]);
    if (dt == DType::F32) {
      std::memcpy(d, s, size_t(width) * 4);
    } else {
      auto* h = reinterpret_cast<uint16_t*>(d);
      for (int64_t k = 0; k < width; ++k) h[k] = f32_to_bf16(s[k]);
    }
  }
}

void CpuBackend::load_rows(std::span<const RowTable* const> tables, std::span<const int64_t> rows, Tensor& dst) {
  ScopedOp op_scope(profile_.get(), "load_rows");
  DSV4_CHECK(tables.size() == rows.size() && dst.rows() == int64_t(rows.size()), "load_rows: ", tables.size(),
             " tables and ", rows.size(), " rows for a destination of ", dst.shape_string());
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowTable& table = *tables[i];
    const int64_t width = table.pool().row_elems();
    DSV4_CHECK(dst.cols() == width, "load_rows: destination ", dst.shape_string(), " does not match rows of ", width);
    const uint8_t* s = table.row(rows[i]);
    float* d = dst.f32() + int64_t(i) * width;
    if (table.pool().dtype() == DType::F32) {
      std::memcpy(d, s, size_t(width) * 4);
    } else {
      const auto* h = reinterpret_cast<const uint16_t*>(s);
      for (int64_t k = 0; k < width; ++k) d[k] = bf16_to_f32(h[k]);
    }
  }
}

void CpuBackend::concat_cols(std::span<const Tensor> parts, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "concat_cols");
  const int64_t n = y.rows();
  int64_t width = 0;
  for (const Tensor& part : parts) {
    DSV4_CHECK(part.rows() == n, "concat_cols: part ", part.shape_string(), " for ", n, " rows");
    width += part.cols();
  }
  DSV4_CHECK(width == y.cols(), "concat_cols: parts of ", width, " columns for ", y.shape_string());
  for (int64_t r = 0; r < n; ++r) {
    float* d = y.f32() + r * width;
    for (const Tensor& part : parts) {
      std::memcpy(d, part.f32() + r * part.cols(), size_t(part.cols()) * 4);
      d += part.cols();
    }
  }
}

void CpuBackend::scale(const Tensor& x, float s, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "scale");
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) y.f32()[i] = round_bf16(x.f32()[i] * s);
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "add");
  const int64_t n = a.numel(), nb = b.numel();
  if (n == nb) {
    for (int64_t i = 0; i < n; ++i) y.f32()[i] = round_bf16(a.f32()[i] + b.f32()[i]);
    return;
  }
  // b [N, W] broadcast over the middle dimension of a [N, C, W]
  const int64_t N = a.dim(0), C = a.dim(1), W = a.dim(2);
  DSV4_CHECK(b.dim(0) == N && b.dim(1) == W, "add: cannot broadcast ", b.shape_string(), " to ", a.shape_string());
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < W; ++k) {
        const int64_t i = (r * C + c) * W + k;
        y.f32()[i] = round_bf16(a.f32()[i] + b.f32()[r * W + k]);
      }
}

void CpuBackend::embed(const WeightView& table, std::span<const int32_t> tokens, int64_t copies, Tensor& out) {
  ScopedOp op_scope(profile_.get(), "embed");
  const int64_t D = table.cols;
  for (size_t n = 0; n < tokens.size(); ++n) {
    const int32_t t = tokens[n];
    DSV4_CHECK(t >= 0 && t < table.rows, "token id ", t, " is outside the vocabulary (", table.rows, ")");
    float* dst = out.f32() + int64_t(n) * copies * D;
    for (int64_t k = 0; k < D; ++k) {
      if (table.format == WeightFormat::BF16) {
        uint16_t h;
        std::memcpy(&h, table.data + (int64_t(t) * D + k) * 2, 2);
        dst[k] = bf16_to_f32(h);
      } else {
        std::memcpy(&dst[k], table.data + (int64_t(t) * D + k) * 4, 4);
      }
    }
    for (int64_t c = 1; c < copies; ++c) std::memcpy(dst + c * D, dst, size_t(D) * 4);
  }
}

void CpuBackend::swiglu(const Tensor& g, const Tensor& u, float limit, Tensor& h) {
  ScopedOp op_scope(profile_.get(), "swiglu");
  const int64_t n = g.numel();
  for (int64_t i = 0; i < n; ++i) {
    float gv = g.f32()[i], uv = u.f32()[i];
    if (limit > 0) {
      uv = std::clamp(uv, -limit, limit);
      gv = std::min(gv, limit);
    }
    h.f32()[i] = round_bf16(gv / (1.0f + std::exp(-gv)) * uv);
  }
}

}  // namespace dsv4
