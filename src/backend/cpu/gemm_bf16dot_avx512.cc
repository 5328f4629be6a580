// AVX-512 kernels for CPUs with BF16 dot products (vdpbf16ps) and VBMI byte permutes (Zen 4,
// Sapphire Rapids): weights are decoded to bf16 by table lookups and multiplied with
// activations in bf16, two products per fp32 lane and instruction. Every FP8/FP4 weight and
// every quantized or bf16 activation is exact in bf16, and each product is exact in fp32, so
// this computes the same sums as the FMA kernels, in a different fixed order (vdpbf16ps treats
// subnormal bf16 inputs as zero; none occur in these weights or activations).
//
// FP8: decoded by byte lookups (gemm_bf16_decode.h) into the Bf16Unpack64 order of the
//   activations. Both block scales are folded into a copy of the activations per 128-row weight
//   tile (exact: powers of two), so each row is one vdpbf16ps chain of exact products — the
//   reference's block sums scaled and added, in another order — with no per-block work: a
//   verification pass of 4 rows stays near the cost of one. Steps of 5 rows or more decode each
//   group of 8 weight rows once for all rows (gemm_decoded.h), with the same chains.
// 4-bit (FP4, NVFP4, INT4): see FourBit. INT2 (the draft head's copy, W2A8): see Int2 (vpdpbusd).
// BF16: the weights are the bf16 operands as stored.
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
#include "backend/cpu/gemm_bf16_decode.h"

inline __m512 dot(__m512 acc, __m512i x, __m512i w) { return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w); }


// Rows of the tile's activations with the 128×128 tile's scales folded in: x·s_x·s_w per
// 128-block, still exact in bf16 (a power of two times a value with ≤ 8 significant bits), so
// each product the tile forms is the exact product of the dequantized weight and activation.
void scale_for_tile(const PreparedInput& in, const WeightView& w, int64_t tile, int64_t r0, int64_t rows,
                    uint16_t* dst, int64_t ld) {
  const int64_t K = w.cols, KB = K / 128;
  const uint8_t* sw = w.scale + tile * w.scale_cols;
  const __m512i odd = _mm512_set1_epi32(int32_t(0xFFFF0000u));
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* x = in.xb + (r0 + r) * in.ldx;
    const float* sx = in.sx + (r0 + r) * in.ldsx;
    uint16_t* d = dst + r * ld;
    for (int64_t b = 0; b < KB; ++b) {
      const __m512 s = _mm512_set1_ps(driver_e8m0(sw[b]) * sx[b]);
      for (int c = 0; c < 128; c += 32) {
        const __m512i v = _mm512_loadu_si512(x + b * 128 + c);
        const __m512 e = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), s);
        const __m512 o = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(v, odd)), s);
        _mm512_storeu_si512(d + b * 128 + c, _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(e), 16),
                                                             _mm512_and_si512(_mm512_castps_si512(o), odd)));
      }
    }
  }
}

// Tiles over activations already scaled for their 128-row weight tile (scale_for_tile): per
// (output, row) one vdpbf16ps chain over the whole row, no per-block scaling. Each block's
// activations are loaded once for all the tile's outputs.
struct Fp8 {
  static constexpr int features(int r) { return r == 1 ? 4 : 2; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols, KB = K / 128;
    const Fp8Decoder fp8;
    const uint8_t* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = w.data + (m + f) * K;
    const uint16_t* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.xb + (r0 + r) * in.ldx;
    __m512 acc[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) acc[f][r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < KB; ++b) {
      // Half a block at a time: 2R activation vectors stay in registers beside the F·R
      // accumulators and the four lookup tables (a whole block's 4R spill at R = 4). Each
      // accumulator still takes its products in column order.
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m512i xv[R][2];
        for (int r = 0; r < R; ++r)
          for (int c = 0; c < 2; ++c) xv[r][c] = _mm512_loadu_si512(xr[r] + b * 128 + 64 * h + 32 * c);
#pragma GCC unroll 8
        for (int f = 0; f < F; ++f) {
          const uint8_t* p = wr[f] + b * 128 + 64 * h;
          prefetch_line(p + kPrefetchTiles * F * K);
          __m512i w0, w1;
          fp8.decode64(p, w0, w1);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            acc[f][r] = dot(acc[f][r], xv[r][0], w0);
            acc[f][r] = dot(acc[f][r], xv[r][1], w1);
          }
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(acc[f][r]);
  }
};

// The 4-bit formats (FP4, NVFP4, INT4; see four_bit_shift), 128 columns (64 bytes) per step and
// nothing widened: the 64 bytes, read as 32 words, index vpermw as they are (it reads 5 index
// bits; the table holds the 16 codes' bf16 values twice, so the fifth bit does not matter), and
// the words shifted right by 4, 8 and 12 give each word's other three nibbles. Word t holds
// columns 4t..4t+3, so the four vectors hold columns 4t, 4t+1, 4t+2 and 4t+3 (the activations'
// Bf16Quad128 order), and lane i of their four dot products sums columns 8i..8i+7, which lie in
// one block in every format (FP4: lanes 4b..4b+3 make block b, NVFP4: 2b and 2b+1, INT4: all 16).
// Each lane is then multiplied by its block's weight scale and added to the output's total; the
// activation scales come folded into the activations (fold_scales: powers of two, exact).
// Per 128 weights: 3 shifts, 4 lookups and 1 scale permute per output, 4 dot products and 1 FMA
// per output and row (the 64-column form needed twice the permutes: ~1.5x the time per weight).
template <WeightFormat kF>
struct FourBit {
  static constexpr int kMaxRows = 4;
  static constexpr int kShift = four_bit_shift(kF);
  static constexpr int kBlocksPerStep = 128 >> kShift;  // FP4 4, NVFP4 8, INT4 1
  static constexpr int features(int r) { return r <= 2 ? 4 : 2; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols, blocks = K >> kShift;
    // bf16 of the sixteen codes' values, twice: e2m1 (fp4_table) or INT4 (q − 8).
    const __m512i table =
        kF == WeightFormat::INT4
            ? _mm512_setr_epi32(int32_t(0xC0E0C100), int32_t(0xC0A0C0C0), int32_t(0xC040C080), int32_t(0xBF80C000),
                                0x3F800000, 0x40404000, 0x40A04080, 0x40E040C0, int32_t(0xC0E0C100),
                                int32_t(0xC0A0C0C0), int32_t(0xC040C080), int32_t(0xBF80C000), 0x3F800000, 0x40404000,
                                0x40A04080, 0x40E040C0)
            : fp4_table();
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i lane_block = _mm512_srli_epi32(iota, kShift - 3);  // lane i → its block within the step
    const uint8_t* wr[F];
    const uint8_t* sr[F];
    for (int f = 0; f < F; ++f) {
      wr[f] = w.data + (m + f) * (K / 2);
      sr[f] = w.scale + (m + f) * w.scale_cols * four_bit_scale_bytes(kF);
    }
    const uint16_t* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.xb + (r0 + r) * in.ldx;
    __m512 tot[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) tot[f][r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < blocks; g += 16) {  // 16 blocks' scales at a time
      const int nb = blocks - g < 16 ? int(blocks - g) : 16;
      __m512 sw[F];
      for (int f = 0; f < F; ++f) sw[f] = four_bit_scales16<kF>(w, sr[f], g, __mmask16((1u << nb) - 1));
      const int64_t s0 = (g << kShift) / 128, s1 = s0 + nb / kBlocksPerStep;
      for (int64_t s = s0; s < s1; ++s) {
        const __m512i which = _mm512_add_epi32(lane_block, _mm512_set1_epi32(int(s - s0) * kBlocksPerStep));
        const uint16_t* x[R];
        for (int r = 0; r < R; ++r) x[r] = xr[r] + s * 128;
#pragma GCC unroll 4
        for (int f = 0; f < F; ++f) {
          const uint8_t* p = wr[f] + s * 64;
          prefetch_line(p + kPrefetchTiles * F * (K / 2));
          const __m512i c = _mm512_loadu_si512(p);
          const __m512i w0 = _mm512_permutexvar_epi16(c, table);
          const __m512i w1 = _mm512_permutexvar_epi16(_mm512_srli_epi16(c, 4), table);
          const __m512i w2 = _mm512_permutexvar_epi16(_mm512_srli_epi16(c, 8), table);
          const __m512i w3 = _mm512_permutexvar_epi16(_mm512_srli_epi16(c, 12), table);
          const __m512 scale = _mm512_permutexvar_ps(which, sw[f]);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            __m512 blk = dot(_mm512_setzero_ps(), _mm512_loadu_si512(x[r]), w0);
            blk = dot(blk, _mm512_loadu_si512(x[r] + 32), w1);
            blk = dot(blk, _mm512_loadu_si512(x[r] + 64), w2);
            blk = dot(blk, _mm512_loadu_si512(x[r] + 96), w3);
            tot[f][r] = _mm512_fmadd_ps(blk, scale, tot[f][r]);
          }
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(tot[f][r]);
  }
};

// INT2 (the draft head's copy; W2A8, number_formats.h), 256 columns per step from 64 code bytes:
// vector j = (codes >> 2j) & 3 bytewise holds in byte b the code of column 4b + j, against the
// activations' Int8Quad256 vector j, so lane i of the four vpdpbusd sums Σ q·x8 over columns
// 16i..16i+15: lanes 0-7 the step's first group of 128, 8-15 its second. Each lane is converted
// and multiplied by its group's weight scale × activation scale; the −1.5 of every code comes out
// once per group (the activations' offsets, times the weight scales, 16 groups per FMA).
// Per 256 weights: 3 shifts and 4 ands per output, 4 vpdpbusd, a conversion, a scale product and
// an FMA per output and row — 64 multiply-adds per instruction, twice vdpbf16ps's.
struct Int2 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r <= 2 ? 4 : 2; }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    const int64_t K = w.cols, groups = K / 128;
    const __m512i three = _mm512_set1_epi8(3);
    const __m512i lane_group = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 3);
    const uint8_t* wr[F];
    const uint16_t* sr[F];
    for (int f = 0; f < F; ++f) {
      wr[f] = w.data + (m + f) * (K / 4);
      sr[f] = reinterpret_cast<const uint16_t*>(w.scale) + (m + f) * w.scale_cols;
    }
    const int8_t* xr[R];
    const float* sxr[R];
    for (int r = 0; r < R; ++r) {
      xr[r] = in.x8 + (r0 + r) * in.ldx;
      sxr[r] = in.sx + (r0 + r) * in.ldsx;
    }
    __m512 tot[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) tot[f][r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g += 16) {  // 16 groups' scales (8 steps) at a time
      const int ng = groups - g < 16 ? int(groups - g) : 16;
      const __mmask16 valid = __mmask16((1u << ng) - 1);
      __m512 sw[F], sx[R];
      for (int f = 0; f < F; ++f)
        sw[f] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(valid, sr[f] + g)), 16));
      for (int r = 0; r < R; ++r) {
        sx[r] = _mm512_maskz_loadu_ps(valid, sxr[r] + g);
        const __m512 offsets = _mm512_maskz_loadu_ps(valid, sxr[r] + groups + g);
        for (int f = 0; f < F; ++f) tot[f][r] = _mm512_fnmadd_ps(sw[f], offsets, tot[f][r]);
      }
      for (int64_t s = g / 2; s < (g + ng) / 2; ++s) {
        const __m512i which = _mm512_add_epi32(lane_group, _mm512_set1_epi32(int(2 * s - g)));
        __m512 sxs[R];
        for (int r = 0; r < R; ++r) sxs[r] = _mm512_permutexvar_ps(which, sx[r]);
#pragma GCC unroll 4
        for (int f = 0; f < F; ++f) {
          const uint8_t* p = wr[f] + s * 64;
          prefetch_line(p + kPrefetchTiles * F * (K / 4));
          const __m512i c = _mm512_loadu_si512(p);
          const __m512i v0 = _mm512_and_si512(c, three), v1 = _mm512_and_si512(_mm512_srli_epi16(c, 2), three),
                        v2 = _mm512_and_si512(_mm512_srli_epi16(c, 4), three),
                        v3 = _mm512_and_si512(_mm512_srli_epi16(c, 6), three);
          const __m512 scale = _mm512_permutexvar_ps(which, sw[f]);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const int8_t* x = xr[r] + s * 256;
            __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v0, _mm512_loadu_si512(x));
            acc = _mm512_dpbusd_epi32(acc, v1, _mm512_loadu_si512(x + 64));
            acc = _mm512_dpbusd_epi32(acc, v2, _mm512_loadu_si512(x + 128));
            acc = _mm512_dpbusd_epi32(acc, v3, _mm512_loadu_si512(x + 192));
            tot[f][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(scale, sxs[r]), tot[f][r]);
          }
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(tot[f][r]);
  }
};

// FP8 row m decoded in full (K words in the Bf16Unpack64 order), as Fp8::tile forms them.
void fp8_decode_row(const WeightView& w, int64_t m, uint16_t* dst) {
  const Fp8Decoder fp8;
  const uint8_t* p = w.data + m * w.cols;
  for (int64_t k = 0; k < w.cols; k += 64) {
    __m512i w0, w1;
    fp8.decode64(p + k, w0, w1);
    _mm512_store_si512(dst + k, w0);
    _mm512_store_si512(dst + k + 32, w1);
  }
}

// Tiles over weights decoded once for many rows: F outputs (rows of `wd`, stride K) × R
// activation rows, one vdpbf16ps chain per pair over the whole row — the chains the decoding
// tiles form, so the bits do not depend on which path ran.
constexpr int kStateFloats = 16;  // one 16-lane chain
template <int F, int R>
void decoded_tile(const uint16_t* wd, int64_t K, const uint16_t* x, int64_t ldx, int64_t k0, int64_t k1,
                  float* state, bool first, bool last, float* out) {
  __m512 acc[F][R];
  for (int f = 0; f < F; ++f)
    for (int r = 0; r < R; ++r)
      acc[f][r] = first ? _mm512_setzero_ps() : _mm512_load_ps(state + (r * 8 + f) * kStateFloats);
  for (int64_t k = k0; k < k1; k += 32) {
    __m512i xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_si512(x + r * ldx + k);
#pragma GCC unroll 4
    for (int f = 0; f < F; ++f) {
      const __m512i wv = _mm512_load_si512(wd + f * K + k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[f][r] = dot(acc[f][r], xv[r], wv);
    }
  }
  for (int f = 0; f < F; ++f)
    for (int r = 0; r < R; ++r) {
      if (last) out[f * R + r] = _mm512_reduce_add_ps(acc[f][r]);
      else _mm512_store_ps(state + (r * 8 + f) * kStateFloats, acc[f][r]);
    }
}

// The FP8 loop nest: as drive() (gemm_driver.h), plus the activations of each row block scaled
// for each 128-row weight tile the outputs reach (1/128 of the product's work).
void drive_fp8(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy,
               bool round) {
  constexpr int64_t kBufferElems = int64_t(64) << 10;  // 128 KB of bf16
  drive_fp8_buffered<uint16_t, kBufferElems, 4>(in, w, m0, m1, scale_for_tile, [&](const PreparedInput& tin,
                                                                                  int64_t rb, int64_t r0, int64_t n,
                                                                                  int64_t m, int64_t m_end) {
    float* yb = y + rb * ldy;
    if (n == 1) drive_group<Fp8, 1>(tin, w, m, m_end, r0, yb, ldy, round);
    else if (n == 2) drive_group<Fp8, 2>(tin, w, m, m_end, r0, yb, ldy, round);
    else if (n == 3) drive_group<Fp8, 3>(tin, w, m, m_end, r0, yb, ldy, round);
    else drive_group<Fp8, 4>(tin, w, m, m_end, r0, yb, ldy, round);
  });
}

using DecodedWord = uint16_t;
constexpr int kDecodedRows = 4;  // 4 outputs × 4 rows: 16 accumulators
#include "backend/cpu/gemm_decoded.h"

struct Bf16 {
  static constexpr int kMaxRows = 4;
  static constexpr int features(int r) { return r == 1 ? 4 : 2; }
  static constexpr int64_t kKBlock = 2048;
  template <int F, int R>
  struct Sums {
    __m512 a0[F][R], a1[F][R];
  };
  template <int F, int R>
  static void tile_part(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, int64_t k0, int64_t k1,
                        Sums<F, R>& s) {
    const int64_t K = w.cols;
    const uint16_t* wr[F];
    for (int f = 0; f < F; ++f) wr[f] = reinterpret_cast<const uint16_t*>(w.data) + (m + f) * K;
    const uint16_t* xr[R];
    for (int r = 0; r < R; ++r) xr[r] = in.xb + (r0 + r) * in.ldx;
    __m512 a0[F][R], a1[F][R];
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) a0[f][r] = s.a0[f][r], a1[f][r] = s.a1[f][r];
    for (int64_t k = k0; k < k1; k += 64) {
#pragma GCC unroll 8
      for (int f = 0; f < F; ++f) {
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k);
        prefetch_line(wr[f] + kPrefetchTiles * F * K + k + 32);
        const __m512i w0 = _mm512_loadu_si512(wr[f] + k), w1 = _mm512_loadu_si512(wr[f] + k + 32);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          a0[f][r] = dot(a0[f][r], _mm512_loadu_si512(xr[r] + k), w0);
          a1[f][r] = dot(a1[f][r], _mm512_loadu_si512(xr[r] + k + 32), w1);
        }
      }
    }
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) s.a0[f][r] = a0[f][r], s.a1[f][r] = a1[f][r];
  }
  template <int F, int R>
  static void finish(const Sums<F, R>& s, float* out) {
    for (int f = 0; f < F; ++f)
      for (int r = 0; r < R; ++r) out[f * R + r] = _mm512_reduce_add_ps(_mm512_add_ps(s.a0[f][r], s.a1[f][r]));
  }
  template <int F, int R>
  static void tile(const PreparedInput& in, const WeightView& w, int64_t m, int64_t r0, float* out) {
    Sums<F, R> s = {};
    tile_part<F, R>(in, w, m, r0, 0, w.cols, s);
    finish<F, R>(s, out);
  }
};

}  // namespace

GemmKernel avx512bf16_gemm(const WeightView& w) {
  GemmKernel k;
  k.isa = CpuIsa::Avx512Bf16;
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::FP8:
      if (K % 128 == 0) {  // (wider inputs than the stack buffer holds take a thread buffer: drive_fp8_buffered)
        k.layout = Layout::Bf16Unpack64;
        k.wants_scales = true;
        k.rows = drive_fp8_any;
      }
      break;
    case WeightFormat::FP4:
    case WeightFormat::NVFP4:
    case WeightFormat::INT4:  // (INT4's activations, bf16 values in the model, are exact in bf16)
      if (four_bit_fits(w)) {
        k.layout = Layout::Bf16Quad128;
        k.fold_scales = true;
        k.rows = w.format == WeightFormat::FP4     ? drive<FourBit<WeightFormat::FP4>>
                 : w.format == WeightFormat::NVFP4 ? drive<FourBit<WeightFormat::NVFP4>>
                                                   : drive<FourBit<WeightFormat::INT4>>;
      }
      break;
    case WeightFormat::INT2:  // W2A8 on vpdpbusd
      if (K % 256 == 0 && w.scale_cols == K / 128 && cpu_features().avx512_vnni) {
        k.layout = Layout::Int8Quad256;
        k.rows = drive<Int2>;
      }
      break;
    case WeightFormat::BF16:
      if (K % 64 == 0) {
        k.layout = Layout::Bf16Natural;
        k.rows = drive<Bf16>;
      }
      break;
    default: break;  // F32, and FP8F (its float multipliers are not exact in bf16): the AVX-512 FMA kernels
  }
  return k;
}

}  // namespace dsv4::cpu
