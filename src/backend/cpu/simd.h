// Small AVX2 helpers for the row-wise CPU ops (the baseline ISA: the same code, hence the same
// bits, on every machine). Each helper does per lane exactly what the scalar code it replaces
// does, so vectorizing an op never changes its results unless a comment says so.
#pragma once
#include <immintrin.h>

#include <cstdint>

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

}  // namespace dsv4::cpu
