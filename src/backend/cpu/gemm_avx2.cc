// AVX2 + FMA + F16C product kernels: the baseline every supported machine runs. The loop
// nest is gemm_driver.h; here are the tiles (F outputs × R rows per decoded weight vector).
//
// FP8 (and FP8F): e4m3 → f16 bits (sign-extend, shift left 7, clear bit 14) → vcvtph2ps =
//   value × 2^-8 exactly; the 2^8 and both block scales are folded into a copy of the
//   activations per 128-row weight tile (exact for powers of two; FP8F's float multipliers cost
//   one f32 rounding per activation), so each row is two FMA chains of products — the
//   reference's block sums scaled and added, in another order.
// 4-bit (FP4, NVFP4, INT4): see FourBit. (Making the floats as bf16 << 16 with shuffles only
//   measured no faster on Zen 4, slower for >1 row.)
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

// Rows of the tile's activations with the 128×128 tile's scales folded in: x·s_x·s_w per 128-block
// (exact: powers of two; the 2^8 of the f16 decoding is in s_x already).
void scale_for_tile(const PreparedInput& in, const WeightView& w, int64_t tile, int64_t r0, int64_t rows, float* dst,
                    int64_t ld) {
  const int64_t K = w.cols, KB = K / 128;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in.x + (r0 + r) * in.ldx;
    const float* sx = in.sx + (r0 + r) * in.ldsx;
    for (int64_t b = 0; b < KB; ++b) {
      const __m256 s = _mm256_set1_ps(driver_tile_scale(w, tile, b) * sx[b]);
      for (int c = 0; c < 128; c += 8)
        _mm256_storeu_ps(dst + r * ld + b * 128 + c, _mm256_mul_ps(_mm256_loadu_ps(x + b * 128 + c), s));
    }
  }
}

// Tiles over activations scaled for their weight tile: per (output, row) two FMA chains (even and
// odd 8-wide chunks) over the whole row, no per-block work. Up to four rows share one decoded
// weight vector (a verification pass of 4 tokens decodes each weight once); the tile runs over
// one chunk of K at a time, its chains kept in `acc` between chunks, so that the chunk's
// activations (R × 4 KB) stay in L1 while the group's outputs pass over them. The chains see the
// same products in the same order whatever F, R and the chunking: batch-invariant.
struct Fp8 {
  static constexpr int64_t kChunk = 1024;
  static constexpr int features(int r) { return r == 1 ? 4 : r == 2 ? 2 : 1; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, int64_t k0, int64_t k1,
                   __m256 (*acc)[4][2]) {
    const int64_t K = w.cols;
    const uint8_t* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = w.data + (m + f) * K;
    const float* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.x + (r0 + r) * in.ldx;
    __m256 a0[F][R], a1[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) a0[f][r] = acc[f][r][0], a1[f][r] = acc[f][r][1];
    for (int64_t k = k0; k < k1; k += 32) {  // quarter blocks
#pragma GCC unroll 4
      for (int f = 0; f < F; ++f) {
        const uint8_t* p = wr[f] + k;
        if ((k & 63) == 0) prefetch_line(p + 8 * K);  // the next group's rows (see fp8_group)
        const __m256i h0 = e4m3_to_f16x16(p), h1 = e4m3_to_f16x16(p + 16);
        const __m256 w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h0));
        const __m256 w1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1));
        const __m256 w2 = _mm256_cvtph_ps(_mm256_castsi256_si128(h1));
        const __m256 w3 = _mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {  // (activations straight from L1: FMAs with a memory operand)
          const float* x = xr[r] + k;
          a0[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x), w0, a0[f][r]);
          a1[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8), w1, a1[f][r]);
          a0[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 16), w2, a0[f][r]);
          a1[f][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 24), w3, a1[f][r]);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) acc[f][r][0] = a0[f][r], acc[f][r][1] = a1[f][r];
  }
};

// One group of ≤ 8 outputs × R rows: K chunk by chunk, each chunk over all the group's outputs.
// The weights of the next group are prefetched a whole group ahead, into L2.
template <int R>
void fp8_group(const PreparedInput& in, const WeightView& w, int64_t m, int64_t m_end, int64_t r0, float* y,
               int64_t ldy, bool round) {
  constexpr int F = Fp8::features(R);
  const int64_t K = w.cols, n = m_end - m;
  __m256 acc[8][4][2];
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < R; ++r) acc[i][r][0] = acc[i][r][1] = _mm256_setzero_ps();
  for (int64_t k0 = 0; k0 < K; k0 += Fp8::kChunk) {
    const int64_t k1 = k0 + Fp8::kChunk < K ? k0 + Fp8::kChunk : K;
    int64_t i = 0;
    for (; i + F <= n; i += F) Fp8::tile<F, R>(in, w, m + i, r0, k0, k1, acc + i);
    for (; i < n; ++i) Fp8::tile<1, R>(in, w, m + i, r0, k0, k1, acc + i);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < R; ++r) {
      const float v = hsum(_mm256_add_ps(acc[i][r][0], acc[i][r][1]));
      y[(r0 + r) * ldy + m + i] = round ? driver_round_bf16(v) : v;
    }
}

// The FP8 loop nest: as drive() (gemm_driver.h), plus the activations of each row block scaled
// for each 128-row weight tile the outputs reach (1/128 of the product's work), and groups run
// by fp8_group.
void drive_fp8(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy,
               bool round) {
  constexpr int64_t kBufferElems = int64_t(33) << 10;  // 132 KB of f32
  drive_fp8_buffered<float, kBufferElems, 4>(in, w, m0, m1, scale_for_tile, [&](const PreparedInput& tin, int64_t rb,
                                                                               int64_t r0, int64_t n, int64_t m,
                                                                               int64_t m_end) {
    float* yb = y + rb * ldy;
    if (n == 1) fp8_group<1>(tin, w, m, m_end, r0, yb, ldy, round);
    else if (n == 2) fp8_group<2>(tin, w, m, m_end, r0, yb, ldy, round);
    else if (n == 3) fp8_group<3>(tin, w, m, m_end, r0, yb, ldy, round);
    else fp8_group<4>(tin, w, m, m_end, r0, yb, ldy, round);
  });
}

// 8 E8M0 bytes (little-endian in a word) → 8 floats 2^(b-127) (0 → 2^-127, 0xFF → NaN).
inline __m256 e8m0x8(uint64_t bytes) {
  const __m256i d = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(bytes)));
  __m256i v = _mm256_slli_epi32(d, 23);
  v = _mm256_blendv_epi8(v, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(d, _mm256_setzero_si256()));
  v = _mm256_blendv_epi8(v, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(d, _mm256_set1_epi32(0xFF)));
  return _mm256_castsi256_ps(v);
}

// 8 block scales of a 4-bit weight row from scale index g on (nb ≤ 8 of them; the rest zero).
template <WeightFormat kF>
inline __m256 four_bit_scales8(const WeightView& w, const uint8_t* row_scales, int64_t g, int nb) {
  constexpr int kBytes = four_bit_scale_bytes(kF);
  alignas(16) uint8_t b[16] = {};
  __builtin_memcpy(b, row_scales + g * kBytes, size_t(nb * kBytes));
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(b));
  if constexpr (kF == WeightFormat::FP4) {
    uint64_t bytes;
    __builtin_memcpy(&bytes, b, 8);
    return e8m0x8(bytes);
  } else if constexpr (kF == WeightFormat::NVFP4) {  // e4m3 → f16 (× 2^-8, exact) → f32, × 2^8 · global
    __m128i h = _mm_cvtepi8_epi16(v);
    h = _mm_and_si128(_mm_slli_epi16(h, 7), _mm_set1_epi16(int16_t(0xBFFF)));
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f * w.global_scale));
  } else {  // INT4: bf16
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
}

// The 4-bit formats (FP4, NVFP4, INT4; see four_bit_shift). Per 32 bytes (64 columns) both
// nibbles index a vpshufb table holding the high byte of each value's f16 encoding (the low byte
// is zero for all sixteen e2m1 values and for the integers -8..7), unpacking against zero makes the
// f16 words, vcvtph2ps the floats; activations are pair-split. Of each 32 columns, p0 sums
// columns 0-15 and p1 columns 16-31: one block scale for both (FP4, INT4) or one each (NVFP4).
template <WeightFormat kF>
struct FourBit {
  static constexpr int kMaxRows = 4;
  static constexpr int kShift = four_bit_shift(kF);
  static constexpr int features(int r) { return r == 1 ? 4 : r == 2 ? 2 : 1; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    // High bytes of the f16 encodings of the sixteen codes' values (e2m1: 0, .5, 1, 1.5, 2, 3, 4, 6
    // and their negatives; INT4: q − 8).
    const __m128i lut16 = kF == WeightFormat::INT4
                              ? _mm_setr_epi8(int8_t(0xC8), int8_t(0xC7), int8_t(0xC6), int8_t(0xC5), int8_t(0xC4),
                                              int8_t(0xC2), int8_t(0xC0), int8_t(0xBC), 0x00, 0x3C, 0x40, 0x42, 0x44,
                                              0x45, 0x46, 0x47)
                              : _mm_setr_epi8(0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, int8_t(0x80),
                                              int8_t(0xB8), int8_t(0xBC), int8_t(0xBE), int8_t(0xC0), int8_t(0xC2),
                                              int8_t(0xC4), int8_t(0xC6));
    const __m256i lut = _mm256_broadcastsi128_si256(lut16);
    const __m256i nibble = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    const __m256i act_of_block = _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), 7 - kShift);
    const uint8_t* wr[F];
    const uint8_t* sr[F];
    for (int f = 0; f < F; ++f) {
      wr[f] = w.data + (m + f) * (K / 2);
      sr[f] = w.scale + (m + f) * w.scale_cols * four_bit_scale_bytes(kF);
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
    const int64_t blocks = K >> kShift;
    alignas(32) float sv[F][R][8];  // block multipliers s_w · s_x of 8 blocks
    for (int64_t g = 0; g < blocks; g += 8) {
      const int nb = blocks - g < 8 ? int(blocks - g) : 8;
      const int acts = ((nb << kShift) + 127) / 128;  // activation blocks the 8 cover
      const __m256i amask = _mm256_cmpgt_epi32(_mm256_set1_epi32(acts), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      for (int f = 0; f < F; ++f) {
        const __m256 swv = four_bit_scales8<kF>(w, sr[f], g, nb);
        for (int r = 0; r < R; ++r) {
          const __m256 sxv = _mm256_permutevar8x32_ps(_mm256_maskload_ps(sxr[r] + (g << kShift) / 128, amask), act_of_block);
          _mm256_store_ps(sv[f][r], _mm256_mul_ps(swv, sxv));
        }
      }
      const int64_t c0 = g << kShift, cols = int64_t(nb) << kShift;
      for (int64_t j = 0; j < cols; j += 64) {  // 64 columns (32 bytes) per step
        const int64_t b = (c0 + j) / 32;        // the step's first 32-column group
#pragma GCC unroll 4
        for (int f = 0; f < F; ++f) {
          if ((b & 3) == 0) prefetch_line(wr[f] + kPrefetchTiles * F * (K / 2) + b * 16);
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[f] + b * 16));
          const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble));
          const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
          // per 128-bit lane (32 columns): evens 0..14, evens 16..30, odds 1..15, odds 17..31
          const __m256i e0 = _mm256_unpacklo_epi8(zero, lo), e1 = _mm256_unpackhi_epi8(zero, lo);
          const __m256i o0 = _mm256_unpacklo_epi8(zero, hi), o1 = _mm256_unpackhi_epi8(zero, hi);
#pragma GCC unroll 2
          for (int half = 0; half < 2; ++half) {
            const __m256 w0 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(e0, 1) : _mm256_castsi256_si128(e0));
            const __m256 w1 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(e1, 1) : _mm256_castsi256_si128(e1));
            const __m256 w2 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(o0, 1) : _mm256_castsi256_si128(o0));
            const __m256 w3 = _mm256_cvtph_ps(half ? _mm256_extracti128_si256(o1, 1) : _mm256_castsi256_si128(o1));
            const int64_t col = j + 32 * half;  // within the group of 8 blocks
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
              const float* x = xr[r] + (b + half) * 32;
              __m256 p0 = _mm256_mul_ps(_mm256_loadu_ps(x), w0);
              __m256 p1 = _mm256_mul_ps(_mm256_loadu_ps(x + 8), w1);
              p0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + 16), w2, p0);
              p1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + 24), w3, p1);
              if constexpr (kShift >= 5) {
                tot[f][r] = _mm256_fmadd_ps(_mm256_add_ps(p0, p1), _mm256_broadcast_ss(&sv[f][r][col >> kShift]), tot[f][r]);
              } else {
                tot[f][r] = _mm256_fmadd_ps(p0, _mm256_broadcast_ss(&sv[f][r][col >> kShift]), tot[f][r]);
                tot[f][r] = _mm256_fmadd_ps(p1, _mm256_broadcast_ss(&sv[f][r][(col + 16) >> kShift]), tot[f][r]);
              }
            }
          }
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = hsum(tot[f][r]);
  }
};

struct Bf16 {
  static constexpr int kMaxRows = 2;
  static constexpr int features(int r) { return r == 1 ? 4 : 2; }
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
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k);
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
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k);
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
    case WeightFormat::FP8F:
      if (K % 128 == 0) {  // (wider inputs than the stack buffer holds take a thread buffer: drive_fp8_buffered)
        k.wants_scales = true;
        k.scale_factor = 256.0f;
        k.rows = drive_fp8;
      }
      break;
    case WeightFormat::FP4:
    case WeightFormat::NVFP4:
    case WeightFormat::INT4:
      if (four_bit_fits(w)) {
        k.layout = Layout::PairSplit32;
        k.wants_scales = true;
        k.rows = w.format == WeightFormat::FP4     ? drive<FourBit<WeightFormat::FP4>>
                 : w.format == WeightFormat::NVFP4 ? drive<FourBit<WeightFormat::NVFP4>>
                                                   : drive<FourBit<WeightFormat::INT4>>;
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
