// Memory, data movement and the element-wise ops (the fast forms: cpu_backend.cc).
#include "backend/reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/reference/ref_gemm.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

// ---- memory: host memory, 64-byte aligned (std::aligned_alloc wants a multiple of the alignment)

void* ReferenceBackend::allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 64) + 63) / 64 * 64);
  DSV4_CHECK(p, "reference backend: out of memory allocating ", bytes, " bytes");
  return p;
}

void ReferenceBackend::release(void* p) { std::free(p); }

// ---- data movement

void ReferenceBackend::to_host(const Tensor& t, void* dst) { std::memcpy(dst, t.data, t.nbytes()); }
void ReferenceBackend::from_host(Tensor& t, const void* src) { std::memcpy(t.data, src, t.nbytes()); }

// dst row i = src row rows[i].
void ReferenceBackend::gather_rows(const Tensor& src, std::span<const int64_t> rows, Tensor& dst) {
  const int64_t n = src.dim(0);
  const size_t row_bytes = src.nbytes() / size_t(n);
  DSV4_CHECK(dst.nbytes() >= rows.size() * row_bytes, "gather_rows: destination ", dst.shape_string(), " cannot hold ",
             rows.size(), " rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    DSV4_CHECK(rows[i] >= 0 && rows[i] < n, "gather_rows: row ", rows[i], " of ", n);
    std::memcpy(static_cast<uint8_t*>(dst.data) + i * row_bytes,
                static_cast<const uint8_t*>(src.data) + size_t(rows[i]) * row_bytes, row_bytes);
  }
}

// Row rows[i] of *tables[i] = src row i, stored as the table's type (bf16: rounded to nearest
// even); no table: row i is not stored. The caller has reserved the rows: ops never allocate
// cache blocks.
void ReferenceBackend::store_rows(std::span<RowTable* const> tables, std::span<const int64_t> rows,
                                  const Tensor& src) {
  DSV4_CHECK(tables.size() == rows.size() && src.rows() == int64_t(rows.size()), "store_rows: ", tables.size(),
             " tables and ", rows.size(), " rows for a source of ", src.shape_string());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!tables[i]) continue;
    const RowTable& table = *tables[i];
    const int64_t width = table.pool().row_elems();
    const DType dt = table.pool().dtype();
    DSV4_CHECK(src.cols() == width, "store_rows: source ", src.shape_string(), " does not match rows of ", width);
    DSV4_CHECK(dt == DType::F32 || dt == DType::BF16, "store_rows: tables of ", dtype_name(dt), " are not supported");
    uint8_t* dst = table.row(rows[i]);
    for (int64_t k = 0; k < width; ++k) {
      const float v = src.f32()[int64_t(i) * width + k];
      if (dt == DType::F32) {
        std::memcpy(dst + k * 4, &v, 4);
      } else {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(dst + k * 2, &h, 2);
      }
    }
  }
}

// dst row i = row rows[i] of *tables[i], widened to f32.
void ReferenceBackend::load_rows(std::span<const RowTable* const> tables, std::span<const int64_t> rows, Tensor& dst) {
  DSV4_CHECK(tables.size() == rows.size() && dst.rows() == int64_t(rows.size()), "load_rows: ", tables.size(),
             " tables and ", rows.size(), " rows for a destination of ", dst.shape_string());
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowTable& table = *tables[i];
    const int64_t width = table.pool().row_elems();
    const DType dt = table.pool().dtype();
    DSV4_CHECK(dst.cols() == width, "load_rows: destination ", dst.shape_string(), " does not match rows of ", width);
    DSV4_CHECK(dt == DType::F32 || dt == DType::BF16, "load_rows: tables of ", dtype_name(dt), " are not supported");
    const uint8_t* src = table.row(rows[i]);
    for (int64_t k = 0; k < width; ++k) {
      float v;
      if (dt == DType::F32) {
        std::memcpy(&v, src + k * 4, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, src + k * 2, 2);
        v = bf16_to_f32(h);
      }
      dst.f32()[int64_t(i) * width + k] = v;
    }
  }
}

// ---- element-wise ops: each output is a bf16 value (the reference holds these tensors in bf16)

// y = bf16(x·s)
void ReferenceBackend::scale(const Tensor& x, float s, Tensor& y) {
  for (int64_t i = 0; i < x.numel(); ++i) y.f32()[i] = round_bf16(x.f32()[i] * s);
}

// y = bf16(a + b); b [N, W] may broadcast over the hc streams of a [N, hc, W] (the MTP's e_proj term).
// y row i = the parts' rows i side by side.
void ReferenceBackend::concat_cols(std::span<const Tensor> parts, Tensor& y) {
  const int64_t n = y.rows();
  int64_t width = 0;
  for (const Tensor& part : parts) {
    DSV4_CHECK(part.rows() == n, "concat_cols: part ", part.shape_string(), " for ", n, " rows");
    width += part.cols();
  }
  DSV4_CHECK(width == y.cols(), "concat_cols: parts of ", width, " columns for ", y.shape_string());
  for (int64_t r = 0; r < n; ++r) {
    int64_t at = 0;
    for (const Tensor& part : parts)
      for (int64_t k = 0; k < part.cols(); ++k) y.f32()[r * width + at++] = part.f32()[r * part.cols() + k];
  }
}

void ReferenceBackend::add(const Tensor& a, const Tensor& b, Tensor& y) {
  if (a.numel() == b.numel()) {
    for (int64_t i = 0; i < a.numel(); ++i) y.f32()[i] = round_bf16(a.f32()[i] + b.f32()[i]);
    return;
  }
  DSV4_CHECK(a.ndim == 3 && b.dim(0) == a.dim(0) && b.numel() == a.dim(0) * a.dim(2), "add: cannot broadcast ",
             b.shape_string(), " to ", a.shape_string());
  const int64_t N = a.dim(0), C = a.dim(1), W = a.dim(2);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < W; ++k) {
        const int64_t i = (r * C + c) * W + k;
        y.f32()[i] = round_bf16(a.f32()[i] + b.f32()[r * W + k]);
      }
}

// Spec §3: X_j = embed[token] for each of the `copies` hc streams.
void ReferenceBackend::embed(const WeightView& table, std::span<const int32_t> tokens, int64_t copies, Tensor& out) {
  const int64_t D = table.cols;
  for (size_t n = 0; n < tokens.size(); ++n) {
    const int32_t t = tokens[n];
    DSV4_CHECK(t >= 0 && t < table.rows, "token id ", t, " is outside the vocabulary (", table.rows, ")");
    for (int64_t c = 0; c < copies; ++c)
      for (int64_t k = 0; k < D; ++k) out.f32()[(int64_t(n) * copies + c) * D + k] = ref::weight_at(table, t, k);
  }
}

// The shared expert's activation (spec §3 "MoE"): h = bf16(silu(min(g, L)) · clamp(u, ±L)); no clamp when L ≤ 0.
void ReferenceBackend::swiglu(const Tensor& g, const Tensor& u, float limit, Tensor& h) {
  for (int64_t i = 0; i < g.numel(); ++i) {
    float gv = g.f32()[i], uv = u.f32()[i];
    if (limit > 0) {
      uv = std::clamp(uv, -limit, limit);
      gv = std::min(gv, limit);
    }
    h.f32()[i] = round_bf16(gv / (1.0f + std::exp(-gv)) * uv);  // silu(g) = g·σ(g), written as g / (1 + e^−g)
  }
}

}  // namespace dsv4
