#include "checkpoint/weight_quantizer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <immintrin.h>

#include "core/number_formats.h"

// The bulk paths use AVX2 (every supported machine has it; see CMakeLists.txt): a
// V4-Flash layer holds 6.4 G expert values, so these loops bound make-checkpoint's speed.

namespace dsv4 {

uint8_t block_scale_e8m0(float amax, float max_code) {
  if (!(amax > 0.0f)) return 127;  // all-zero block: 2^0
  // f32_to_e8m0(pow2_ceil(amax / max_code)) on the float bits (once per 32 values: no libm).
  const uint32_t u = std::bit_cast<uint32_t>(amax / max_code);
  const uint32_t biased = ((u >> 23) & 0xFF) + ((u & 0x7FFFFF) != 0 ? 1 : 0);
  return uint8_t(std::min<uint32_t>(biased, 254));
}

namespace {

const __m256 kAbsMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));

float horizontal_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// e4m3 codes of 8 values with |v| <= 448 (as int32 lanes). Normal range: keep 3 mantissa
// bits, rounding to nearest even (the carry may move into the exponent), and rebias the
// exponent from 127 to 7; below 2^-6 the code is |v| / 2^-9 rounded to even (the
// magic-number addition rounds in the FPU's default mode).
__m256i e4m3_codes(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
  const __m256 a = _mm256_and_ps(v, kAbsMask);
  __m256i u = _mm256_castps_si256(a);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 20), _mm256_set1_epi32(1));
  u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), odd));
  const __m256i normal = _mm256_sub_epi32(_mm256_srli_epi32(u, 20), _mm256_set1_epi32(120 << 3));
  const __m256 magic = _mm256_set1_ps(16384.0f);
  const __m256 sub_grid = _mm256_sub_ps(_mm256_add_ps(a, magic), magic);
  const __m256i sub = _mm256_cvttps_epi32(_mm256_mul_ps(sub_grid, _mm256_set1_ps(512.0f)));
  const __m256 is_sub = _mm256_cmp_ps(a, _mm256_set1_ps(0.015625f), _CMP_LT_OQ);
  const __m256i code = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(normal), _mm256_castsi256_ps(sub), is_sub));
  return _mm256_or_si256(code, sign);
}

// e2m1 codes of 8 values (saturating at 6): the number of grid midpoints below |v|, with
// the comparison at each midpoint chosen so that ties go to the even code.
__m256i e2m1_codes(__m256 v) {
  const __m256 a = _mm256_and_ps(v, kAbsMask);
  __m256i code = _mm256_setzero_si256();
  auto count = [&](float threshold, int predicate_gt) {
    const __m256 t = _mm256_set1_ps(threshold);
    const __m256 m = predicate_gt ? _mm256_cmp_ps(a, t, _CMP_GT_OQ) : _mm256_cmp_ps(a, t, _CMP_GE_OQ);
    code = _mm256_sub_epi32(code, _mm256_castps_si256(m));  // a true mask is -1
  };
  count(0.25f, 1);
  count(0.75f, 0);
  count(1.25f, 1);
  count(1.75f, 0);
  count(2.5f, 1);
  count(3.5f, 0);
  count(5.0f, 1);
  const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(v), 31), 3);
  return _mm256_or_si256(code, sign);
}

// The low bytes of 32 int32 codes (4 vectors), in order.
__m256i narrow_to_bytes(__m256i c0, __m256i c1, __m256i c2, __m256i c3) {
  const __m256i w01 = _mm256_packus_epi32(c0, c1), w23 = _mm256_packus_epi32(c2, c3);
  const __m256i b = _mm256_packus_epi16(w01, w23);  // dwords interleaved across lanes
  return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void encode_fp8_tile_columns(const float* x, int64_t rows, int64_t cols, int64_t c0, int64_t c1,
                             float inv_scale, uint8_t* codes) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  const __m256 hi = _mm256_set1_ps(kFp8Max), lo = _mm256_set1_ps(-kFp8Max);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    uint8_t* cr = codes + r * cols;
    int64_t c = c0;
    for (; c + 32 <= c1; c += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + c + 8 * k), inv);
        q[k] = e4m3_codes(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(cr + c), narrow_to_bytes(q[0], q[1], q[2], q[3]));
    }
    for (; c < c1; ++c) cr[c] = encode_e4m3_in_range(std::clamp(xr[c] * inv_scale, -kFp8Max, kFp8Max));
  }
}

float tile_amax(const float* x, int64_t rows, int64_t cols, int64_t c0, int64_t c1) {
  __m256 m = _mm256_setzero_ps();
  float tail = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    int64_t c = c0;
    for (; c + 8 <= c1; c += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xr + c), kAbsMask));
    for (; c < c1; ++c) tail = std::max(tail, std::fabs(xr[c]));
  }
  return std::max(horizontal_max(m), tail);
}

}  // namespace

uint8_t encode_e4m3_in_range(float v) {
  alignas(32) int32_t out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), e4m3_codes(_mm256_set1_ps(v)));
  return uint8_t(out[0]);
}

uint8_t encode_e2m1_rne(float v) {
  alignas(32) int32_t out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), e2m1_codes(_mm256_set1_ps(v)));
  return uint8_t(out[0]);
}

void quantize_fp8_stripe(const float* x, int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales) {
  for (int64_t c0 = 0, tile = 0; c0 < cols; c0 += kFp8Block, ++tile) {
    const int64_t c1 = std::min(cols, c0 + kFp8Block);
    scales[tile] = block_scale_e8m0(tile_amax(x, rows, cols, c0, c1), kFp8Max);
    encode_fp8_tile_columns(x, rows, cols, c0, c1, 1.0f / e8m0_to_f32(scales[tile]), codes);
  }
}

void quantize_fp8_stripe_fixed(const float* x, int64_t rows, int64_t cols, int scale_exp,
                               uint8_t* codes, uint8_t* scales) {
  const uint8_t scale = uint8_t(127 + scale_exp);
  for (int64_t c0 = 0, tile = 0; c0 < cols; c0 += kFp8Block, ++tile) {
    scales[tile] = scale;
    encode_fp8_tile_columns(x, rows, cols, c0, std::min(cols, c0 + kFp8Block), 1.0f / e8m0_to_f32(scale), codes);
  }
}

void quantize_int4_rows(const float* x, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales) {
  const int64_t groups = cols / kInt4Group;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float* v = x + r * cols + g * kInt4Group;
      float amax = 0.0f;
      for (int64_t i = 0; i < kInt4Group; ++i) amax = std::max(amax, std::fabs(v[i]));
      const uint16_t h = f32_to_bf16(amax > 0.0f ? amax / 7.0f : 1.0f);
      std::memcpy(scales + (r * groups + g) * 2, &h, 2);
      const float scale = bf16_to_f32(h);
      uint8_t* out = packed + (r * cols + g * kInt4Group) / 2;
      for (int64_t i = 0; i < kInt4Group; i += 2) {
        const int q0 = int(std::clamp(std::nearbyint(v[i] / scale), -8.0f, 7.0f)) + 8;
        const int q1 = int(std::clamp(std::nearbyint(v[i + 1] / scale), -8.0f, 7.0f)) + 8;
        out[i / 2] = uint8_t(q0 | (q1 << 4));
      }
    }
}

namespace {
// The INT2 code of v for levels (q - 1.5)·s: the nearest level (boundaries at -s, 0, s).
int int2_code(float v, float s) { return int(std::clamp(std::floor(v / s + 2.0f), 0.0f, 3.0f)); }
}  // namespace

void quantize_int2_rows(const float* x, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales) {
  const int64_t groups = cols / kInt2Group;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float* v = x + r * cols + g * kInt2Group;
      double ss = 0.0;
      for (int64_t i = 0; i < kInt2Group; ++i) ss += double(v[i]) * v[i];
      float s = float(std::sqrt(ss / kInt2Group));
      for (int round = 0; round < 2 && s > 0.0f; ++round) {
        double vl = 0.0, ll = 0.0;  // least squares s = Σ v·l / Σ l² for the levels l the values took
        for (int64_t i = 0; i < kInt2Group; ++i) {
          const double l = int2_code(v[i], s) - 1.5;
          vl += v[i] * l;
          ll += l * l;
        }
        if (vl > 0.0) s = float(vl / ll);
      }
      const uint16_t h = f32_to_bf16(s > 0.0f && std::isfinite(s) ? s : 1.0f);
      std::memcpy(scales + (r * groups + g) * 2, &h, 2);
      const float scale = bf16_to_f32(h);
      uint8_t* out = packed + (r * cols + g * kInt2Group) / 4;
      for (int64_t i = 0; i < kInt2Group; i += 4) {
        int byte = 0;
        for (int j = 0; j < 4; ++j) byte |= int2_code(v[i + j], scale) << (2 * j);
        out[i / 4] = uint8_t(byte);
      }
    }
}

void quantize_fp4_rows(const float* x, int64_t rows, int64_t cols, uint8_t* packed, uint8_t* scales) {
  static_assert(kFp4Block == 32, "one block = four AVX2 vectors");
  const int64_t blocks = cols / kFp4Block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * cols + b * kFp4Block;
      __m256 v[4];
      __m256 m = _mm256_setzero_ps();
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(xb + 8 * k);
        m = _mm256_max_ps(m, _mm256_and_ps(v[k], kAbsMask));
      }
      const uint8_t s = block_scale_e8m0(horizontal_max(m), kFp4Max);
      scales[r * blocks + b] = s;
      const __m256 inv = _mm256_set1_ps(1.0f / e8m0_to_f32(s));
      const __m256i bytes = narrow_to_bytes(e2m1_codes(_mm256_mul_ps(v[0], inv)), e2m1_codes(_mm256_mul_ps(v[1], inv)),
                                            e2m1_codes(_mm256_mul_ps(v[2], inv)), e2m1_codes(_mm256_mul_ps(v[3], inv)));
      // Pairs of codes (even column in the low byte of each 16-bit lane) -> one byte, low nibble even.
      const __m256i pairs = _mm256_or_si256(_mm256_and_si256(bytes, _mm256_set1_epi16(0x000F)),
                                            _mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi16(0x00F0)));
      const __m256i packed16 = _mm256_packus_epi16(pairs, pairs);  // 8 bytes per lane, twice
      const __m256i ordered = _mm256_permute4x64_epi64(packed16, 0x08);  // lane 0 low, lane 1 low
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + r * (cols / 2) + b * (kFp4Block / 2)),
                       _mm256_castsi256_si128(ordered));
    }
  }
}

void encode_bf16(const float* x, int64_t n, uint8_t* out) {
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), round = _mm256_set1_epi32(0x7FFF);
  for (; i + 16 <= n; i += 16) {
    __m256i h[2];
    for (int k = 0; k < 2; ++k) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      const __m256i u = _mm256_castps_si256(v);
      const __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(round, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
      const __m256i nan = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));  // quiet NaN, as f32_to_bf16
      const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
      h[k] = _mm256_srli_epi32(_mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(rounded),
                                                                    _mm256_castsi256_ps(nan), is_nan)), 16);
    }
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h[0], h[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), packed);
  }
  for (; i < n; ++i) {
    const uint16_t h = f32_to_bf16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

}  // namespace dsv4
