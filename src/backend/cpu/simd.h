// Small AVX2 helpers for the row-wise CPU ops (the baseline ISA: the same code, hence the same
// bits, on every machine). Each helper does per lane exactly what the scalar code it replaces
// does, so vectorizing an op never changes its results unless a comment says so.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "core/number_formats.h"

namespace dsv4::cpu {

// round_bf16 on 8 lanes (ties to even; NaN → quiet NaN as f32_to_bf16).
inline __m256 round_bf16_x8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i r = _mm256_and_si256(
      _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF),
                                           _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1)))),
      _mm256_set1_epi32(int32_t(0xFFFF0000u)));
  const __m256i nan = _mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi32(int32_t(0xFFFF0000u))),
                                      _mm256_set1_epi32(0x00400000));
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                            _mm256_set1_epi32(0x7F800000));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(r, nan, is_nan));
}

// 8 bf16 → 8 f32.
inline __m256 load_bf16_x8(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

inline void bf16_to_f32_row(const uint16_t* src, int64_t n, float* dst) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(dst + k, load_bf16_x8(src + k));
  for (; k < n; ++k) {
    const uint32_t u = uint32_t(src[k]) << 16;
    __builtin_memcpy(dst + k, &u, 4);
  }
}

// ((a0+a4)+(a1+a5)) + ((a2+a6)+(a3+a7)): the reference dot products' final combination.
inline float combine8(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // a_i + a_{i+4}
  s = _mm_add_ps(s, _mm_shuffle_ps(s, s, _MM_SHUFFLE(2, 3, 0, 1)));              // (b0+b1), (b2+b3)
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehl_ps(s, s)));
}

// FP4 fake quantization of n values (n a multiple of 32), blocks of 32: exactly dsv4::fake_quant_fp4
// (s = 2^ceil(log2(max(amax, 6·2^-126)/6)), v = e2m1(clamp(x/s, ±6))·s). Rounding to the e2m1 grid
// nearest-even: below 1 in steps of 1/2 (an add/subtract of 2^22), from 1 on to one mantissa bit.
inline void fake_quant_fp4_row(float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f), six = _mm256_set1_ps(6.0f), one = _mm256_set1_ps(1.0f);
  const __m256 magic = _mm256_set1_ps(4194304.0f);
  const float min_amax = kFp4Max * std::ldexp(1.0f, -126);
  for (int64_t b = 0; b < n; b += 32) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + b + i)), m);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float s = pow2_ceil(std::max(_mm_cvtss_f32(m4), min_amax) * (1.0f / kFp4Max));
    const __m256 vs = _mm256_set1_ps(s), inv = _mm256_set1_ps(1.0f / s);  // exact: s is a power of two
    for (int i = 0; i < 32; i += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + b + i), inv);
      const __m256 a = _mm256_min_ps(_mm256_andnot_ps(sign, v), six);  // NaN → 6, as f32_to_e2m1
      const __m256 small = _mm256_sub_ps(_mm256_add_ps(a, magic), magic);
      __m256i u = _mm256_castps_si256(a);
      u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x1FFFFF),
                                               _mm256_and_si256(_mm256_srli_epi32(u, 22), _mm256_set1_epi32(1))));
      const __m256 big = _mm256_castsi256_ps(_mm256_and_si256(u, _mm256_set1_epi32(int32_t(0xFFC00000u))));
      const __m256 q = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, one, _CMP_LT_OQ));
      _mm256_storeu_ps(x + b + i, _mm256_mul_ps(_mm256_or_ps(q, _mm256_and_ps(v, sign)), vs));
    }
  }
}

// Walsh–Hadamard transform of w values (a power of two, ≥ 8; Sylvester order: the same adds and
// subtracts as the plain butterfly loops, 8 lanes at a time), then round_bf16(v·scale).
inline void hadamard_row(float* v, int64_t w, float scale) {
  const __m256i swap1 = _mm256_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6), swap2 = _mm256_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5);
  for (int64_t i = 0; i < w; i += 8) {  // h = 1, 2, 4 inside each vector: lanes j and j^h
    __m256 x = _mm256_loadu_ps(v + i);
    __m256 y = _mm256_permutevar8x32_ps(x, swap1);
    x = _mm256_blend_ps(_mm256_add_ps(x, y), _mm256_sub_ps(y, x), 0xAA);
    y = _mm256_permutevar8x32_ps(x, swap2);
    x = _mm256_blend_ps(_mm256_add_ps(x, y), _mm256_sub_ps(y, x), 0xCC);
    y = _mm256_permute2f128_ps(x, x, 1);
    x = _mm256_blend_ps(_mm256_add_ps(x, y), _mm256_sub_ps(y, x), 0xF0);
    _mm256_storeu_ps(v + i, x);
  }
  for (int64_t h = 8; h < w; h *= 2)
    for (int64_t i = 0; i < w; i += 2 * h)
      for (int64_t j = i; j < i + h; j += 8) {
        const __m256 a = _mm256_loadu_ps(v + j), b = _mm256_loadu_ps(v + j + h);
        _mm256_storeu_ps(v + j, _mm256_add_ps(a, b));
        _mm256_storeu_ps(v + j + h, _mm256_sub_ps(a, b));
      }
  const __m256 vs = _mm256_set1_ps(scale);
  for (int64_t k = 0; k < w; k += 8) _mm256_storeu_ps(v + k, round_bf16_x8(_mm256_mul_ps(_mm256_loadu_ps(v + k), vs)));
}

// e^x on 8 lanes (Cephes-style: x = n·ln2 + r, |r| ≤ ln2/2, degree-6 polynomial; relative error
// ≤ 2 ulp). Results below e^-87.3 are 0 (std::exp would give subnormals), above e^88.7 +inf;
// NaN stays NaN.
inline __m256 exp_x8(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.7228f), lo = _mm256_set1_ps(-87.3365f);
  const __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n by the exponent field (n in [-126, 128]; split to stay finite before the clamp's ends)
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

}  // namespace dsv4::cpu
