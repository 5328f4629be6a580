// AVX2 + FMA + F16C product kernels: the baseline every supported machine runs. The loop
// nest is gemm_driver.h; here are the tiles (F outputs × R rows per decoded weight vector).
//
// FP8: e4m3 → f16 bits (sign-extend, shift left 7, clear bit 14) → vcvtph2ps = value × 2^-8
//   exactly; the 2^8 rides in the activation multipliers. Per 128-block two FMA chains of 8,
//   added, then tot = fma(partial, s_w·s_x, tot).
// FP4: per 32 bytes (two 32-wide blocks) both nibbles index a vpshufb table holding the high
//   byte of each e2m1 value's f16 encoding (the low byte is zero for all sixteen), unpacking
//   against zero makes the f16 words, vcvtph2ps the floats; activations are pair-split.
// BF16: a dword holds two bf16: shift left 16 = the even element, mask = the odd one.
// F32: two accumulators per output.
#include <immintrin.h>

#include "backend/cpu/gemm.h"

namespace dsv4::cpu {

namespace {

#include "backend/cpu/gemm_driver.h"

// Fixed-order horizontal sum.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// 16 e4m3 codes → their f16 encodings (value × 2^-8).
inline __m256i e4m3_to_f16x16(const uint8_t* p) {
  const __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16(int16_t(0xBFFF)));
}

struct Fp8 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 4 : r == 2 ? 2 : 1; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols, KB = K / 128;
    const uint8_t* wr[F];
    const uint8_t* sr[F];
    for (int f = 0; f < F; ++f) {
      wr[f] = w.data + (m + f) * K;
      sr[f] = w.scale + ((m + f) / 128) * w.scale_cols;
    }
    const float* xr[R];
    const float* sxr[R];
    for (int r = 0; r < R; ++r) {
      xr[r] = in.x + (r0 + r) * in.ldx;
      sxr[r] = in.sx + (r0 + r) * in.ldsx;
    }
    __m256 tot[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) tot[f][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < KB; ++b) {
#pragma GCC unroll 4
      for (int f = 0; f < F; ++f) {
        const uint8_t* p = wr[f] + b * 128;
        prefetch_line(p + F * K);
        prefetch_line(p + F * K + 64);
        __m256 a0[R], a1[R];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {  // quarters of 32 weights
          const __m256i h0 = e4m3_to_f16x16(p + 32 * q), h1 = e4m3_to_f16x16(p + 32 * q + 16);
          const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h0));
          const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1));
          const __m256 w2 = _mm256_cvtph_ps(_mm256_castsi256_si128(h1));
          const __m256 w3 = _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1));
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const float* x = xr[r] + b * 128 + 32 * q;
            if (q == 0) {
              a0[r] = _mm256_mul_ps(_mm256_loadu_ps(x), w0);
              a1[r] = _mm256_mul_ps(_mm256_loadu_ps(x + 8), w1);
            } else {
              a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x), w0, a0[r]);
              a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), w1, a1[r]);
            }
            a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 16), w2, a0[r]);
            a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 24), w3, a1[r]);
          }
        }
        const float sw = driver_e8m0(sr[f][b]);
        for (int r = 0; r < R; ++r)
          tot[f][r] = _mm256_fmadd_ps(_mm256_add_ps(a0[r], a1[r]), _mm256_set1_ps(sw * sxr[r][b]), tot[f][r]);
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = hsum(tot[f][r]);
  }
};

struct Fp4 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 4 : r == 2 ? 2 : 1; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    // High bytes of the f16 encodings of 0, .5, 1, 1.5, 2, 3, 4, 6 and their negatives.
    const __m256i lut = _mm256_setr_epi8(0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, int8_t(0x80), int8_t(0xB8),
                                         int8_t(0xBC), int8_t(0xBE), int8_t(0xC0), int8_t(0xC2), int8_t(0xC4),
                                         int8_t(0xC6), 0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, int8_t(0x80),
                                         int8_t(0xB8), int8_t(0xBC), int8_t(0xBE), int8_t(0xC0), int8_t(0xC2),
                                         int8_t(0xC4), int8_t(0xC6));
    const __m256i nibble = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    const uint8_t* wr[F];
    const uint8_t* sr[F];
    for (int f = 0; f < F; ++f) {
      wr[f] = w.data + (m + f) * (K / 2);
      sr[f] = w.scale + (m + f) * w.scale_cols;
    }
    const float* xr[R];
    const float* sxr[R];
    for (int r = 0; r < R; ++r) {
      xr[r] = in.x + (r0 + r) * in.ldx;
      sxr[r] = in.sx + (r0 + r) * in.ldsx;
    }
    __m256 tot[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) tot[f][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / 32; b += 2) {  // two blocks of 32 per 32 bytes
#pragma GCC unroll 4
      for (int f = 0; f < F; ++f) {
        if ((b & 3) == 0) prefetch_line(wr[f] + F * (K / 2) + b * 16);
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[f] + b * 16));
        const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble));
        const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
        // per 128-bit lane (one block): evens 0..14, evens 16..30, odds 1..15, odds 17..31
        const __m256i e0 = _mm256_unpacklo_epi8(zero, lo), e1 = _mm256_unpackhi_epi8(zero, lo);
        const __m256i o0 = _mm256_unpacklo_epi8(zero, hi), o1 = _mm256_unpackhi_epi8(zero, hi);
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          const __m256 w0 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(e0, 1) : _mm256_castsi256_si128(e0));
          const __m256 w1 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(e1, 1) : _mm256_castsi256_si128(e1));
          const __m256 w2 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(o0, 1) : _mm256_castsi256_si128(o0));
          const __m256 w3 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(o1, 1) : _mm256_castsi256_si128(o1));
          const int64_t blk = b + half;
          const float sw = driver_e8m0(sr[f][blk]);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const float* x = xr[r] + blk * 32;
            __m256 p0 = _mm256_mul_ps(_mm256_loadu_ps(x), w0);
            __m256 p1 = _mm256_mul_ps(_mm256_loadu_ps(x + 8), w1);
            p0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + 16), w2, p0);
            p1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + 24), w3, p1);
            tot[f][r] = _mm256_fmadd_ps(_mm256_add_ps(p0, p1), _mm256_set1_ps(sw * sxr[r][blk >> 2]), tot[f][r]);
          }
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = hsum(tot[f][r]);
  }
};

struct Bf16 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 4 : r == 2 ? 2 : 1; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    const __m256i odd_mask = _mm256_set1_epi32(int32_t(0xFFFF0000u));
    const uint16_t* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = reinterpret_cast<const uint16_t*>(w.data) + (m + f) * K;
    const float* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.x + (r0 + r) * in.ldx;
    __m256 te[F][R], to[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) te[f][r] = to[f][r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 32) {
#pragma GCC unroll 4
      for (int f = 0; f < F; ++f) {
        prefetch_line(wr[f] + F * K + k);
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[f] + k));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[f] + k + 16));
        const __m256 we0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
        const __m256 wo0 = _mm256_castsi256_ps(_mm256_and_si256(v0, odd_mask));
        const __m256 we1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
        const __m256 wo1 = _mm256_castsi256_ps(_mm256_and_si256(v1, odd_mask));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const float* x = xr[r] + k;
          te[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x), we0, te[f][r]);
          to[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 16), wo0, to[f][r]);
          te[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), we1, te[f][r]);
          to[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 24), wo1, to[f][r]);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = hsum(_mm256_add_ps(te[f][r], to[f][r]));
  }
};

struct F32 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 4 : r <= 3 ? 2 : 1; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    const float* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = reinterpret_cast<const float*>(w.data) + (m + f) * K;
    const float* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.x + (r0 + r) * in.ldx;
    __m256 t0[F][R], t1[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) t0[f][r] = t1[f][r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
#pragma GCC unroll 4
      for (int f = 0; f < F; ++f) {
        prefetch_line(wr[f] + F * K + k);
        const __m256 w0 = _mm256_loadu_ps(wr[f] + k), w1 = _mm256_loadu_ps(wr[f] + k + 8);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          t0[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr[r] + k), w0, t0[f][r]);
          t1[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(xr[r] + k + 8), w1, t1[f][r]);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = hsum(_mm256_add_ps(t0[f][r], t1[f][r]));
  }
};

}  // namespace

GemmKernel avx2_gemm(const WeightView& w) {
  GemmKernel k;
  k.isa = CpuIsa::Avx2;
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::FP8:
      if (K % 128 == 0) {
        k.wants_scales = true;
        k.scale_factor = 256.0f;
        k.rows = drive<Fp8>;
      }
      break;
    case WeightFormat::FP4:
      if (K % 128 == 0 && w.scale_cols == K / 32) {
        k.layout = Layout::PairSplit32;
        k.wants_scales = true;
        k.rows = drive<Fp4>;
      }
      break;
    case WeightFormat::BF16:
      if (K % 32 == 0) {
        k.layout = Layout::PairSplit32;
        k.rows = drive<Bf16>;
      }
      break;
    case WeightFormat::F32:
      if (K % 16 == 0) k.rows = drive<F32>;
      break;
    default: break;
  }
  return k;
}

}  // namespace dsv4::cpu
