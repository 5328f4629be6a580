#include "backend/cpu/index_scores.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "backend/cpu/simd.h"

namespace dsv4::cpu {

// Eight entries at a time sharing each load of q.
void index_scores(const float* q, const float* w, int64_t ih, int64_t id, const float* keys, int64_t t0, int64_t t1,
                  float* score) {
  int64_t t = t0;
  for (; t + 8 <= t1; t += 8) {
    float total[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t h = 0; h < ih; ++h) {
      const float* qh = q + h * id;
      __m256 acc[8];
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t k = 0; k < id; k += 8) {
        const __m256 qv = _mm256_loadu_ps(qh + k);
        for (int j = 0; j < 8; ++j)
          acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(qv, _mm256_loadu_ps(keys + (t + j) * id + k)));
      }
      for (int j = 0; j < 8; ++j) {
        const float s = std::max(round_bf16(combine8(acc[j])), 0.0f);
        total[j] += round_bf16(s * w[h]);
      }
    }
    for (int j = 0; j < 8; ++j) score[t + j] = round_bf16(total[j]);
  }
  for (; t < t1; ++t) {
    float total = 0.0f;
    for (int64_t h = 0; h < ih; ++h) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t k = 0; k < id; k += 8)
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + h * id + k), _mm256_loadu_ps(keys + t * id + k)));
      const float s = std::max(round_bf16(combine8(acc)), 0.0f);
      total += round_bf16(s * w[h]);
    }
    score[t] = round_bf16(total);
  }
}

float reference_dot(const float* q, const uint16_t* key, int64_t id) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t k = 0; k < id; k += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + k), load_bf16_x8(key + k)));
  return combine8(acc);
}

// A value with leading bit 2^E and lowest set bit 2^L times one with E', L' lies below 2^(E+E'+2)
// and is a multiple of 2^(L+L'). So every partial sum of the dot product is a multiple of 2^lo
// below dim·2^(hi+2): an integer of at most log2(dim) + hi + 2 − lo bits times 2^lo — exact in
// f32's 24 bits when that is ≤ 24, normal when lo ≥ −126, finite when hi + 2 + log2(dim) ≤ 127.
// FP4 values (at most two significant bits, L ≥ E − 1) with block scales less than 2^(9−log2(dim/128))
// apart pass.
bool dot_is_exact(int hi, int lo, int64_t dim) {
  if (hi < -2048 || lo > 2048) return true;  // no block with nonzero products
  const int log2_dim = std::bit_width(uint64_t(std::max<int64_t>(dim, 1) - 1));  // ceil(log2 dim)
  return log2_dim + hi + 2 - lo <= 24 && lo >= -126 && hi + 2 + log2_dim <= 127;
}

bool index_scores_amx_fits(int64_t heads, int64_t dim) {
  return heads % 16 == 0 && heads <= 256 && dim % 32 == 0 && dim <= 1024;
}

void prepare_index_query(const float* q, const float* w, int64_t heads, int64_t dim, IndexQuery& out) {
  out.q = q;
  out.w = w;
  out.heads = heads;
  out.dim = dim;
  out.narrow = true;
  out.bf16.resize(size_t(heads * dim));
  const int64_t blocks = dim / 32;
  out.hi.assign(size_t(blocks * heads), kEmptyHi);
  out.lo.assign(size_t(blocks * heads), kEmptyLo);
  out.hi_all.assign(size_t(heads), kEmptyHi);
  out.lo_all.assign(size_t(heads), kEmptyLo);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t k = 0; k < dim; ++k) {
      uint32_t u;
      std::memcpy(&u, q + h * dim + k, 4);
      out.bf16[size_t(h * dim + k)] = uint16_t(u >> 16);
      if ((u & 0x7FFFFFFFu) == 0) continue;
      const int field = int((u >> 23) & 0xFF);
      if ((u & 0x003FFFFFu) || field == 0 || field == 255) out.narrow = false;
      const size_t at = size_t((k / 32) * heads + h);
      out.hi[at] = std::max(out.hi[at], field - 127);
      out.lo[at] = std::min(out.lo[at], field - 127 - int((u >> 22) & 1));
      out.hi_all[size_t(h)] = std::max(out.hi_all[size_t(h)], out.hi[at]);
      out.lo_all[size_t(h)] = std::min(out.lo_all[size_t(h)], out.lo[at]);
    }
}

}  // namespace dsv4::cpu
