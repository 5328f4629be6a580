// Sparse attention with an attention sink on the CPU.
//
// For each query row the selected KV rows (window positions, then compressed entries in
// ascending order) are gathered once into f32 and shared by all heads. The heads are split
// over the threads; each thread walks the rows in blocks that stay in its L2 cache, for the
// scores of all its heads, and again for the value sums. Softmax in fp32 with the maximum over
// the row; as in the reference, the probabilities are rounded to bf16 before the value product
// while the denominator (plus e^(sink − max)) uses the unrounded values.
//
// Per (row, head) the operations are fixed: score t = one FMA chain over the 8-lane chunks of
// q·kv_t (combined as the reference's dot), value sum = one FMA chain over t per dimension.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

constexpr int64_t kRowBlock = 32;  // KV rows per block: 32 × 512 × 4 = 64 KB

void load_row(const RowTable& table, int64_t row, int64_t width, float* dst) {
  const uint8_t* src = table.row(row);
  if (table.pool().dtype() == DType::F32) std::memcpy(dst, src, size_t(width) * 4);
  else cpu::bf16_to_f32_row(reinterpret_cast<const uint16_t*>(src), width, dst);
}

// scores[t] = scale · q·kv_t for t in [t0, t1) (d a multiple of 8), four rows at a time.
void block_scores(const float* q, const float* kv, int64_t d, int64_t t0, int64_t t1, float scale, float* scores) {
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) {
    const float* k0 = kv + t * d;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < d; c += 8) {
      const __m256 qv = _mm256_loadu_ps(q + c);
      a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + c), a0);
      a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d + c), a1);
      a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * d + c), a2);
      a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * d + c), a3);
    }
    scores[t] = cpu::combine8(a0) * scale;
    scores[t + 1] = cpu::combine8(a1) * scale;
    scores[t + 2] = cpu::combine8(a2) * scale;
    scores[t + 3] = cpu::combine8(a3) * scale;
  }
  for (; t < t1; ++t) {
    const float* k0 = kv + t * d;
    __m256 a0 = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(k0 + c), a0);
    scores[t] = cpu::combine8(a0) * scale;
  }
}

// acc[0, d) += Σ_{t in [t0, t1)} p[t] · kv_t, one FMA per (t, dimension), in t order.
void block_values(const float* p, const float* kv, int64_t d, int64_t t0, int64_t t1, float* acc) {
  for (int64_t c = 0; c < d; c += 64) {
    const int64_t w = std::min<int64_t>(64, d - c);
    if (w == 64) {
      __m256 a[8];
      for (int i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(acc + c + 8 * i);
      for (int64_t t = t0; t < t1; ++t) {
        const __m256 pt = _mm256_set1_ps(p[t]);
        const float* v = kv + t * d + c;
        for (int i = 0; i < 8; ++i) a[i] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v + 8 * i), a[i]);
      }
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(acc + c + 8 * i, a[i]);
    } else {
      for (int64_t i = 0; i < w; i += 8) {
        __m256 a = _mm256_loadu_ps(acc + c + i);
        for (int64_t t = t0; t < t1; ++t)
          a = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), _mm256_loadu_ps(kv + t * d + c + i), a);
        _mm256_storeu_ps(acc + c + i, a);
      }
    }
  }
}

}  // namespace

void CpuBackend::sparse_attention(const Tensor& q, std::span<const AttentionRow> rows, const Tensor* selected,
                                  const WeightView& sink, float softmax_scale, Tensor& out) {
  const int64_t n = int64_t(rows.size()), H = q.dim(1), d = q.dim(2);
  DSV4_CHECK(q.dim(0) == n && sink.cols == H, "sparse_attention: q ", q.shape_string(), " vs ", n, " rows, ",
             sink.cols, " sinks");
  DSV4_CHECK(d % 8 == 0, "sparse_attention: head dim ", d, " is not a multiple of 8");
  const int threads = pool_.size();
  if (attn_kv_.size() < size_t(threads)) {
    attn_kv_.resize(size_t(threads));
    attn_entries_.resize(size_t(threads));
  }

  // Row r's KV set: the window's raw rows, then the compressed entries in ascending order.
  struct KvSet {
    const AttentionRow* row;
    int64_t first, n_window, total;
    const std::vector<int64_t>* entries;
  };
  auto kv_set = [&](int64_t r, std::vector<int64_t>& entries) {
    const AttentionRow& row = rows[size_t(r)];
    const int64_t first = std::max<int64_t>(0, row.position - row.window + 1);
    entries.clear();
    if (selected) {
      const int64_t k = selected->cols();
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = selected->i32()[r * k + j];
        if (e >= 0) entries.push_back(e);
      }
      std::sort(entries.begin(), entries.end());
    } else {
      for (int64_t e = 0; e < row.num_entries; ++e) entries.push_back(e);
    }
    const int64_t n_window = row.position - first + 1;
    return KvSet{&row, first, n_window, n_window + int64_t(entries.size()), &entries};
  };
  auto gather = [&](const KvSet& set, float* kv, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      if (t < set.n_window) load_row(*set.row->kv, set.first + t, d, kv + t * d);
      else load_row(*set.row->entries, (*set.entries)[size_t(t - set.n_window)], d, kv + t * d);
    }
  };
  // Heads [h0, h1) of row r over its gathered KV set.
  auto attend = [&](int64_t r, const float* kv, int64_t total, int64_t h0, int64_t h1, int worker) {
    const int64_t nh = h1 - h0;
    float* scores = scratch(worker, size_t(nh * (total + 1)));
    float* sums = scores + nh * total;
    for (int64_t t0 = 0; t0 < total; t0 += kRowBlock)
      for (int64_t h = h0; h < h1; ++h)
        block_scores(q.f32() + (r * H + h) * d, kv, d, t0, std::min(total, t0 + kRowBlock), softmax_scale,
                     scores + (h - h0) * total);
    for (int64_t h = h0; h < h1; ++h) {
      float* s = scores + (h - h0) * total;
      float mx = -INFINITY;
      for (int64_t t = 0; t < total; ++t) mx = std::max(mx, s[t]);
      float sum = 0.0f;
      for (int64_t t = 0; t < total; ++t) {
        const float p = std::exp(s[t] - mx);
        sum += p;
        s[t] = round_bf16(p);
      }
      float sink_h;
      std::memcpy(&sink_h, sink.data + h * 4, 4);
      sums[h - h0] = sum + std::exp(sink_h - mx);
      std::fill(out.f32() + (r * H + h) * d, out.f32() + (r * H + h + 1) * d, 0.0f);
    }
    // Value sums: blocks of rows outside, heads inside, accumulating in the output rows.
    for (int64_t t0 = 0; t0 < total; t0 += kRowBlock)
      for (int64_t h = h0; h < h1; ++h)
        block_values(scores + (h - h0) * total, kv, d, t0, std::min(total, t0 + kRowBlock),
                     out.f32() + (r * H + h) * d);
    for (int64_t h = h0; h < h1; ++h) {
      float* o = out.f32() + (r * H + h) * d;
      const __m256 sum = _mm256_set1_ps(sums[h - h0]);
      for (int64_t k = 0; k < d; k += 8)
        _mm256_storeu_ps(o + k, cpu::round_bf16_x8(_mm256_div_ps(_mm256_loadu_ps(o + k), sum)));
    }
  };

  if (n >= threads) {  // prefill, verification: whole rows per task, buffers per worker
    pool_.run(n, [&](int64_t r, int worker) {
      const KvSet set = kv_set(r, attn_entries_[size_t(worker)]);
      std::vector<float>& kv = attn_kv_[size_t(worker)];
      if (kv.size() < size_t(set.total * d)) kv.resize(size_t(set.total * d));
      gather(set, kv.data(), 0, set.total);
      attend(r, kv.data(), set.total, 0, H, worker);
    });
    return;
  }
  // Decode: one row at a time, the gather and the heads split over the threads.
  const int64_t chunks = std::min<int64_t>(H, int64_t(threads) * 2), per = (H + chunks - 1) / chunks;
  for (int64_t r = 0; r < n; ++r) {
    const KvSet set = kv_set(r, attn_entries_[0]);
    std::vector<float>& kv = attn_kv_[0];
    if (kv.size() < size_t(set.total * d)) kv.resize(size_t(set.total * d));
    const int64_t gper = (set.total + threads - 1) / threads;
    pool_.run(threads, [&](int64_t c, int) { gather(set, kv.data(), c * gper, std::min(set.total, (c + 1) * gper)); });
    pool_.run(chunks, [&](int64_t c, int worker) {
      const int64_t h0 = c * per, h1 = std::min(H, h0 + per);
      if (h0 < h1) attend(r, kv.data(), set.total, h0, h1, worker);
    });
  }
}

}  // namespace dsv4
