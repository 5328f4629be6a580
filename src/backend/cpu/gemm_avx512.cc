// AVX-512 product kernels (F/BW/VL/DQ), chosen at run time. The loop nest is gemm_driver.h;
// here are the tiles: F outputs × R rows sharing each decoded weight vector.
//
// FP8 (and FP8F): e4m3 → f16 bits (sign-extend to 16 bits, shift left 7, clear bit 14) →
//   vcvtph2ps gives the value × 2^-8 exactly (f16's exponent bias is 8 more); the 2^8 and both
//   block scales are folded into a copy of the activations per 128-row weight tile (exact for
//   powers of two; FP8F's float multipliers cost one f32 rounding per activation), so each row
//   is two FMA chains of products.
// 4-bit (FP4, NVFP4, INT4): 16 bytes → 16 dwords; vpermps looks up the low nibble (even column)
//   and, after a shift, the high one (odd column) in a 16-entry f32 table: 4 instructions per 32
//   weights, with the activations pair-split so that no interleaving is needed.
// BF16: a dword holds two bf16: shift left 16 = the even element, mask = the odd one.
// F32: two accumulators per output (even/odd 16-lane chunks).
#include <immintrin.h>

#include "backend/cpu/gemm.h"

// GCC 12 flags the intentionally undefined lanes inside its own AVX-512 intrinsics.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace dsv4::cpu {

namespace {

#include "backend/cpu/gemm_driver.h"

inline __m512 decode_e4m3x16(const uint8_t* p) {
  __m256i h = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  h = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16(int16_t(0xBFFF)));
  return _mm512_cvtph_ps(h);
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
      const __m512 s = _mm512_set1_ps(driver_tile_scale(w, tile, b) * sx[b]);
      for (int c = 0; c < 128; c += 16)
        _mm512_storeu_ps(dst + r * ld + b * 128 + c, _mm512_mul_ps(_mm512_loadu_ps(x + b * 128 + c), s));
    }
  }
}

// Tiles over activations scaled for their weight tile: per (output, row) two FMA chains (even and
// odd 16-wide chunks) over the whole row, no per-block work.
struct Fp8 {
  static constexpr int features(int r) { return r == 1 ? 4 : 2; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    const uint8_t* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = w.data + (m + f) * K;
    const float* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.x + (r0 + r) * in.ldx;
    __m512 a0[F][R], a1[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) a0[f][r] = a1[f][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 64) {
#pragma GCC unroll 8
      for (int f = 0; f < F; ++f) {
        const uint8_t* p = wr[f] + k;
        prefetch_line(p + kPrefetchTiles * F * K);
        __m512 wv[4];
        for (int c = 0; c < 4; ++c) wv[c] = decode_e4m3x16(p + 16 * c);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const float* x = xr[r] + k;
          a0[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x), wv[0], a0[f][r]);
          a1[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + 16), wv[1], a1[f][r]);
          a0[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + 32), wv[2], a0[f][r]);
          a1[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + 48), wv[3], a1[f][r]);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(_mm512_add_ps(a0[f][r], a1[f][r]));
  }
};

// The FP8 loop nest: as drive() (gemm_driver.h), plus the activations of each row block scaled
// for each 128-row weight tile the outputs reach (1/128 of the product's work).
void drive_fp8(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy,
               bool round) {
  constexpr int64_t kBufferElems = int64_t(32) << 10;  // 128 KB of f32
  drive_fp8_buffered<float, kBufferElems, 2>(in, w, m0, m1, scale_for_tile, [&](const PreparedInput& tin, int64_t rb,
                                                                               int64_t r0, int64_t n, int64_t m,
                                                                               int64_t m_end) {
    float* yb = y + rb * ldy;
    if (n == 1) drive_group<Fp8, 1>(tin, w, m, m_end, r0, yb, ldy, round);
    else if (n == 2) drive_group<Fp8, 2>(tin, w, m, m_end, r0, yb, ldy, round);
    else if (n == 3) drive_group<Fp8, 3>(tin, w, m, m_end, r0, yb, ldy, round);
    else drive_group<Fp8, 4>(tin, w, m, m_end, r0, yb, ldy, round);
  });
}

// The 4-bit formats (FP4, NVFP4, INT4; see four_bit_shift): 16 bytes → 16 dwords; vpermps looks up
// the low nibble (even column) and, after a shift, the high one (odd column) in a 16-entry f32
// table, with the activations pair-split so that no interleaving is needed. Lane i of a 32-column
// step holds columns 2i and 2i+1: one block scale per step (FP4, INT4) or one per 8 lanes (NVFP4).
template <WeightFormat kF>
struct FourBit {
  static constexpr int kMaxRows = 4;
  static constexpr int kShift = four_bit_shift(kF);
  static constexpr int features(int r) { return r <= 2 ? 8 : 4; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols, blocks = K >> kShift;
    const __m512 table = kF == WeightFormat::INT4
                             ? _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7)
                             : _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f,
                                              -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i act_of_block = _mm512_srli_epi32(iota, 7 - kShift);  // block i → activation block
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
    __m512 tot[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) tot[f][r] = _mm512_setzero_ps();
    alignas(64) float sv[F][R][16];  // block multipliers s_w · s_x of 16 blocks
    for (int64_t g = 0; g < blocks; g += 16) {
      const int nb = blocks - g < 16 ? int(blocks - g) : 16;
      const int acts = ((nb << kShift) + 127) / 128;  // activation blocks the 16 cover
      const __mmask16 bmask = __mmask16((1u << nb) - 1), amask = __mmask16((1u << acts) - 1);
      for (int f = 0; f < F; ++f) {
        const __m512 swv = four_bit_scales16<kF>(w, sr[f], g, bmask);
        for (int r = 0; r < R; ++r) {
          const __m512 sxv = _mm512_permutexvar_ps(act_of_block, _mm512_maskz_loadu_ps(amask, sxr[r] + (g << kShift) / 128));
          _mm512_store_ps(sv[f][r], _mm512_mul_ps(swv, sxv));
        }
      }
      const int64_t b0 = (g << kShift) / 32, steps = (int64_t(nb) << kShift) / 32;
      for (int64_t j = 0; j < steps; ++j) {
        const int64_t b = b0 + j;  // 32 columns, 16 bytes per row
        // NVFP4: lanes 0-7 take block 2j, lanes 8-15 block 2j + 1
        const __m512i pair = _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32(int(32 * j)), _mm512_add_epi32(iota, iota)), kShift);
#pragma GCC unroll 8
        for (int f = 0; f < F; ++f) {
          if ((b & 3) == 0) prefetch_line(wr[f] + kPrefetchTiles * F * (K / 2) + b * 16);
          const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[f] + b * 16)));
          const __m512 we = _mm512_permutexvar_ps(d, table);
          const __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), table);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const float* x = xr[r] + b * 32;
            __m512 blk = _mm512_mul_ps(_mm512_loadu_ps(x), we);
            blk = _mm512_fmadd_ps(_mm512_loadu_ps(x + 16), wo, blk);
            const __m512 s = kShift >= 5 ? _mm512_set1_ps(sv[f][r][(32 * j) >> kShift])
                                         : _mm512_permutexvar_ps(pair, _mm512_load_ps(sv[f][r]));
            tot[f][r] = _mm512_fmadd_ps(blk, s, tot[f][r]);
          }
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(tot[f][r]);
  }
};

struct Bf16 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 8 : r <= 3 ? 4 : 2; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    const __m512i odd_mask = _mm512_set1_epi32(int32_t(0xFFFF0000u));
    const uint16_t* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = reinterpret_cast<const uint16_t*>(w.data) + (m + f) * K;
    const float* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.x + (r0 + r) * in.ldx;
    __m512 te[F][R], to[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) te[f][r] = to[f][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 32) {
#pragma GCC unroll 8
      for (int f = 0; f < F; ++f) {
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k);
        const __m512i v = _mm512_loadu_si512(wr[f] + k);
        const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(v, odd_mask));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          te[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[r] + k), we, te[f][r]);
          to[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[r] + k + 16), wo, to[f][r]);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(_mm512_add_ps(te[f][r], to[f][r]));
  }
};

struct F32 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 8 : r <= 3 ? 4 : 2; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols;
    const float* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = reinterpret_cast<const float*>(w.data) + (m + f) * K;
    const float* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.x + (r0 + r) * in.ldx;
    __m512 t0[F][R], t1[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) t0[f][r] = t1[f][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 32) {
#pragma GCC unroll 8
      for (int f = 0; f < F; ++f) {
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k);
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k + 16);
        const __m512 w0 = _mm512_loadu_ps(wr[f] + k), w1 = _mm512_loadu_ps(wr[f] + k + 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          t0[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[r] + k), w0, t0[f][r]);
          t1[f][r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[r] + k + 16), w1, t1[f][r]);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(_mm512_add_ps(t0[f][r], t1[f][r]));
  }
};

}  // namespace

GemmKernel avx512_gemm(const WeightView& w) {
  GemmKernel k;
  k.isa = CpuIsa::Avx512;
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
      if (K % 32 == 0) k.rows = drive<F32>;
      break;
    default: break;
  }
  return k;
}

}  // namespace dsv4::cpu
