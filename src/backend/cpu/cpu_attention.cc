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
// q·kv_t (combined as the reference's dot), e^(s − max) by a vectorized exp (≤ 2 ulp from
// std::exp), value sum = one FMA chain over t per dimension.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

constexpr int64_t kRowBlock = 8;  // KV rows per block: 8 rows of 2 KB stay in L1 without set conflicts

void load_row(const RowTable& table, int64_t row, int64_t width, float* dst) {
  const uint8_t* src = table.row(row);
  if (table.pool().dtype() == DType::F32) std::memcpy(dst, src, size_t(width) * 4);
  else cpu::bf16_to_f32_row(reinterpret_cast<const uint16_t*>(src), width, dst);
}

// Scores of one or two heads (q1 may be null) over rows [t0, t1): s[t] = scale · q·kv_t, one FMA
// chain per (head, row) over the 8-lane chunks of d, combined as the reference's dot. Two heads
// and four rows at a time: eight independent chains sharing the loads. (Six rows measured slower.)
void block_scores(const float* q0, const float* q1, const float* kv, int64_t d, int64_t t0, int64_t t1, float scale,
                  float* s0, float* s1) {
  constexpr int kRows = 4;
  int64_t t = t0;
  if (q1) {
    for (; t + kRows <= t1; t += kRows) {
      const float* k0 = kv + t * d;
      __m256 a[2][kRows];
      for (int j = 0; j < kRows; ++j) a[0][j] = a[1][j] = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) {
        const __m256 x0 = _mm256_loadu_ps(q0 + c), x1 = _mm256_loadu_ps(q1 + c);
        for (int j = 0; j < kRows; ++j) {
          const __m256 k = _mm256_loadu_ps(k0 + j * d + c);
          a[0][j] = _mm256_fmadd_ps(x0, k, a[0][j]);
          a[1][j] = _mm256_fmadd_ps(x1, k, a[1][j]);
        }
      }
      for (int j = 0; j < kRows; ++j) {
        s0[t + j] = cpu::combine8(a[0][j]) * scale;
        s1[t + j] = cpu::combine8(a[1][j]) * scale;
      }
    }
  }
  for (; t < t1; ++t)
    for (int h = 0; h < (q1 ? 2 : 1); ++h) {
      const float* q = h ? q1 : q0;
      __m256 a0 = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(kv + t * d + c), a0);
      (h ? s1 : s0)[t] = cpu::combine8(a0) * scale;
    }
}

// o[c, c + 8·V) += Σ_{t in [t0, t1)} p[t] · kv_t for one or two heads (p1/o1 may be null).
template <int V>
void values_chunk(const float* p0, const float* p1, const float* kv, int64_t d, int64_t t0, int64_t t1, int64_t c,
                  float* o0, float* o1) {
  __m256 a0[V], a1[V];
  for (int i = 0; i < V; ++i) {
    a0[i] = _mm256_loadu_ps(o0 + c + 8 * i);
    a1[i] = p1 ? _mm256_loadu_ps(o1 + c + 8 * i) : _mm256_setzero_ps();
  }
  if (p1) {
    for (int64_t t = t0; t < t1; ++t) {
      const __m256 w0 = _mm256_set1_ps(p0[t]), w1 = _mm256_set1_ps(p1[t]);
      const float* v = kv + t * d + c;
      for (int i = 0; i < V; ++i) {
        const __m256 x = _mm256_loadu_ps(v + 8 * i);
        a0[i] = _mm256_fmadd_ps(w0, x, a0[i]);
        a1[i] = _mm256_fmadd_ps(w1, x, a1[i]);
      }
    }
  } else {
    for (int64_t t = t0; t < t1; ++t) {
      const __m256 w0 = _mm256_set1_ps(p0[t]);
      for (int i = 0; i < V; ++i) a0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(kv + t * d + c + 8 * i), a0[i]);
    }
  }
  for (int i = 0; i < V; ++i) {
    _mm256_storeu_ps(o0 + c + 8 * i, a0[i]);
    if (p1) _mm256_storeu_ps(o1 + c + 8 * i, a1[i]);
  }
}

// o[0, d) += Σ_{t in [t0, t1)} p[t] · kv_t for one or two heads: one FMA per (head, t, dimension),
// in t order; two heads share each load of kv, 32 dimensions (8 chains) at a time.
void block_values(const float* p0, const float* p1, const float* kv, int64_t d, int64_t t0, int64_t t1, float* o0,
                  float* o1) {
  int64_t c = 0;
  for (; c + 32 <= d; c += 32) values_chunk<4>(p0, p1, kv, d, t0, t1, c, o0, o1);
  for (; c < d; c += 8) values_chunk<1>(p0, p1, kv, d, t0, t1, c, o0, o1);
}

}  // namespace

void CpuBackend::sparse_attention(const Tensor& q, std::span<const AttentionRow> rows, const Tensor* selected,
                                  const WeightView& sink, float softmax_scale, Tensor& out) {
  ScopedOp op_scope(profile_.get(), "sparse_attention", int64_t(rows.size()));
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
  // Rows of the set are scattered over the cache's blocks: fetch a few rows ahead.
  auto source = [&](const KvSet& set, int64_t t) -> const uint8_t* {
    return t < set.n_window ? set.row->kv->row(set.first + t)
                            : set.row->entries->row((*set.entries)[size_t(t - set.n_window)]);
  };
  auto gather = [&](const KvSet& set, float* kv, int64_t t0, int64_t t1) {
    const size_t row_bytes = t1 > t0 ? (t0 < set.n_window ? set.row->kv : set.row->entries)->pool().row_bytes() : 0;
    for (int64_t t = t0; t < t1; ++t) {
      if (t + 4 < t1) {
        const uint8_t* ahead = source(set, t + 4);
        for (size_t b = 0; b < row_bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + b), _MM_HINT_T0);
      }
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
      for (int64_t h = h0; h < h1; h += 2) {
        const bool two = h + 1 < h1;
        block_scores(q.f32() + (r * H + h) * d, two ? q.f32() + (r * H + h + 1) * d : nullptr, kv, d, t0,
                     std::min(total, t0 + kRowBlock), softmax_scale, scores + (h - h0) * total,
                     two ? scores + (h + 1 - h0) * total : nullptr);
      }
    for (int64_t h = h0; h < h1; ++h) {
      float* s = scores + (h - h0) * total;
      float mx = -INFINITY;
      for (int64_t t = 0; t < total; ++t) mx = std::max(mx, s[t]);
      // p = e^(s − max) (8 lanes), summed in t order unrounded, kept rounded to bf16.
      const __m256 vmx = _mm256_set1_ps(mx);
      float sum = 0.0f;
      int64_t t = 0;
      for (; t + 8 <= total; t += 8) {
        alignas(32) float p[8];
        const __m256 e = cpu::exp_x8(_mm256_sub_ps(_mm256_loadu_ps(s + t), vmx));
        _mm256_store_ps(p, e);
        for (int j = 0; j < 8; ++j) sum += p[j];
        _mm256_storeu_ps(s + t, cpu::round_bf16_x8(e));
      }
      for (; t < total; ++t) {
        alignas(32) float p[8] = {s[t] - mx};
        _mm256_store_ps(p, cpu::exp_x8(_mm256_load_ps(p)));
        sum += p[0];
        s[t] = round_bf16(p[0]);
      }
      float sink_h;
      std::memcpy(&sink_h, sink.data + h * 4, 4);
      sums[h - h0] = sum + std::exp(sink_h - mx);
      std::fill(out.f32() + (r * H + h) * d, out.f32() + (r * H + h + 1) * d, 0.0f);
    }
    // Value sums: blocks of rows outside, heads inside, accumulating in the output rows.
    for (int64_t t0 = 0; t0 < total; t0 += kRowBlock)
      for (int64_t h = h0; h < h1; h += 2) {
        const bool two = h + 1 < h1;
        block_values(scores + (h - h0) * total, two ? scores + (h + 1 - h0) * total : nullptr, kv, d, t0,
                     std::min(total, t0 + kRowBlock), out.f32() + (r * H + h) * d,
                     two ? out.f32() + (r * H + h + 1) * d : nullptr);
      }
    for (int64_t h = h0; h < h1; ++h) {
      float* o = out.f32() + (r * H + h) * d;
      const __m256 sum = _mm256_set1_ps(sums[h - h0]);
      for (int64_t k = 0; k < d; k += 8)
        _mm256_storeu_ps(o + k, cpu::round_bf16_x8(_mm256_div_ps(_mm256_loadu_ps(o + k), sum)));
    }
  };

  const int64_t work = n * H * d * (rows.empty() ? 0 : rows[0].window + rows[0].num_entries + 1);  // ~MACs / 2
  if (n >= threads) {  // prefill, verification: whole rows per task, buffers per worker
    run_tasks(n, work, [&](int64_t r, int worker) {
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
    run_tasks(threads, set.total * d * 4, [&](int64_t c, int) {
      gather(set, kv.data(), c * gper, std::min(set.total, (c + 1) * gper));
    });
    run_tasks(chunks, work, [&](int64_t c, int worker) {
      const int64_t h0 = c * per, h1 = std::min(H, h0 + per);
      if (h0 < h1) attend(r, kv.data(), set.total, h0, h1, worker);
    });
  }
}

}  // namespace dsv4
