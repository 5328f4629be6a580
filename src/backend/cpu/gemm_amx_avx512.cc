// AMX product kernels (Sapphire Rapids and later): the weights decoded to bf16 by the lookups of
// the vdpbf16ps kernels (gemm_bf16_decode.h), their block scales folded into the exponents, and
// multiplied with the activations on the tile unit, whose bf16 rate is ~20× the vector units'.
//
// Tiles: C[16 outputs][16 rows] (fp32) += A[16 outputs][32 inputs] · B[16 input pairs][16 rows][2]
// with A the decoded weight rows (BF16 weights: the mapped rows themselves) and B the activation
// rows in VNNI pairs, built once per call. Each output's sum is one chain of TDPBF16PS steps over
// its 32-input chunks in order, whatever the number of rows: rows past the last are zeros, and a
// column of C depends on its own row alone — so the kernels are batch-invariant, like the others.
//
// Scales (all powers of two, so folding is exact): FP4 — the block scales of the weights go into
// the decoded words (Fp4Row), the activations' into the activations (fold_scales); FP8 — the
// weight tile's scale is added to the exponents of the decoded words (clamped as Fp4Row's: the
// e4m3 exponents 118..135 stay normal for scales 2^-117 .. 2^119; 0xFF gives NaN words).
#include <immintrin.h>

#include "backend/cpu/amx_tiles.h"
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

// The words of `v` that are not ±0 with `offset` added to them (a power-of-two scale in the exponent).
inline __m512i scale_words(__m512i v, __m512i offset) {
  return _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7FFF)), v, offset);
}

// Weights of row m, inputs [k0, k0 + len) (64 | k0, len), as bf16 words times their scales in
// the activations' order. Steps of few rows decode a span at a time just before the tile unit
// needs it; steps of many rows decode whole rows once — with these same functions, so the words
// are the same.
//
// FP8 (Bf16Unpack64 order): the weight tile's scale added to the exponents.
void fp8_decode_span(const WeightView& w, int64_t m, int64_t k0, int64_t len, uint16_t* dst) {
  const Fp8Decoder fp8;
  const uint8_t* p = w.data + m * w.cols;
  const uint8_t* sw = w.scale + (m / 128) * w.scale_cols;
  for (int64_t k = k0; k < k0 + len;) {
    const uint8_t s = sw[k / 128];
    const int e = s < 10 ? 10 : s > 246 ? 246 : s;
    const __m512i offset = _mm512_set1_epi16(int16_t((e - 127) * 128));
    const int64_t end = (k / 128 + 1) * 128 < k0 + len ? (k / 128 + 1) * 128 : k0 + len;
    for (; k < end; k += 64, dst += 64) {
      __m512i w0, w1;
      fp8.decode64(p + k, w0, w1);
      w0 = scale_words(w0, offset);
      w1 = scale_words(w1, offset);
      if (s == 0xFF) w0 = w1 = _mm512_set1_epi16(0x7FC0);
      _mm512_store_si512(dst, w0);
      _mm512_store_si512(dst + 32, w1);
    }
  }
}

// FP4 (Bf16PairSplit64 order): Fp4Row's words.
void fp4_decode_span(const WeightView& w, int64_t m, int64_t k0, int64_t len, uint16_t* dst) {
  Fp4Row row(w.data + m * (w.cols / 2), w.scale + m * w.scale_cols);
  const int64_t b1 = (k0 + len) / 32;
  for (int64_t b = k0 / 32; b < b1;) {
    const int64_t g = b / 32 * 32;  // Fp4Row loads the scales of 32 blocks at a time
    const int nb = int((g + 32 < b1 ? g + 32 : b1) - g);
    row.load_scales(g, nb);
    for (; b < g + nb; b += 2, dst += 64) {
      __m512i even, odd;
      row.decode_pair(g, int(b - g), even, odd);
      _mm512_store_si512(dst, even);
      _mm512_store_si512(dst + 32, odd);
    }
  }
}

// The activation rows as B tiles: tile (rb, c) at b + (rb·KC + c)·512 holds dword kp of row
// 16·rb + r (inputs 32c + 2kp, +1) at [kp][r]; rows past n are zeros.
void build_vnni(const PreparedInput& in, int64_t KC, int64_t RB, uint16_t* b) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i index = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(int32_t(in.ldx / 2)));
  for (int64_t rb = 0; rb < RB; ++rb) {
    const int64_t valid = in.n - rb * 16 < 16 ? in.n - rb * 16 : 16;
    const __mmask16 mask = __mmask16((1u << valid) - 1);
    const int* rows = reinterpret_cast<const int*>(in.xb + rb * 16 * in.ldx);
    for (int64_t c = 0; c < KC; ++c)
      for (int kp = 0; kp < 16; ++kp)
        _mm512_store_si512(b + ((rb * KC + c) * 16 + kp) * 32,
                           _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, index, rows + c * 16 + kp, 4));
  }
}

// Prefetches (into L2) the weight bytes of row m, inputs [k, k + len), and their FP4 scales.
inline void prefetch_weights(const WeightView& w, int64_t m, int64_t k, int64_t len) {
  const bool fp4 = w.format == WeightFormat::FP4;
  const uint8_t* p = fp4 ? w.data + m * (w.cols / 2) + k / 2 : w.data + m * w.cols + k;
  const int64_t bytes = fp4 ? len / 2 : len;
  for (int64_t i = 0; i < bytes; i += 64) prefetch_line(p + i);
  if (fp4 && k % 2048 == 0) prefetch_line(w.scale + m * w.scale_cols + k / 32);
}

using DecodeSpan = void (*)(const WeightView&, int64_t m, int64_t k0, int64_t len, uint16_t* dst);

// One pair of C tiles' chain step: A rows at a (stride lda words), B tiles at b0 / b1 (chunk kc).
struct TileStep {
  bool two_a, two_b;
  void run(const uint16_t* a0, const uint16_t* a1, int64_t lda, const uint16_t* b0, const uint16_t* b1) const {
    _tile_loadd(4, a0, lda * 2);
    _tile_loadd(6, b0, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (two_b) {
      _tile_loadd(7, b1, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if (two_a) {
      _tile_loadd(5, a1, lda * 2);
      _tile_dpbf16ps(2, 5, 6);
      if (two_b) _tile_dpbf16ps(3, 5, 7);
    }
  }
};

// The C tiles of outputs [m, m + mf) × rows [r0, r0 + 32) into y (tiles past mf or n: not read).
void store_c(float* c, int64_t m, int64_t mf, int64_t r0, int64_t n, float* y, int64_t ldy, bool round) {
  const bool two_a = mf > 16, two_b = n - r0 > 16;
  _tile_stored(0, c, 64);
  if (two_b) _tile_stored(1, c + 256, 64);
  if (two_a) _tile_stored(2, c + 512, 64);
  if (two_a && two_b) _tile_stored(3, c + 768, 64);
  for (int t = 0; t < 4; ++t) {
    const int64_t mo = (t >> 1) * 16, rt = r0 + (t & 1) * 16;
    const int64_t outputs = mf - mo < 16 ? mf - mo : 16, rows = n - rt < 16 ? n - rt : 16;
    for (int64_t i = 0; i < outputs; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        const float v = c[t * 256 + i * 16 + r];
        y[(rt + r) * ldy + m + mo + i] = round ? driver_round_bf16(v) : v;
      }
  }
}

inline void zero_c() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// Outputs [m0, m1) of every row, 32 outputs (two A tiles) × 32 rows (two B tiles) at a time.
// Up to 32 rows (decode, verification): each 64-input step decodes its 32 × 64 weights into L1
// and runs two chain steps. More rows: whole weight rows are decoded once and every block of 32
// rows runs over them. Tiles 0-3: C, 4-5: A, 6-7: B.
template <DecodeSpan decode>
void amx_rows(const PreparedInput& in, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy,
              bool round) {
  configure_tiles();
  thread_local AlignedBuffer<uint16_t> a_buffer, b_buffer;
  thread_local AlignedBuffer<float> c_buffer;
  const int64_t K = w.cols, KC = K / 32, RB = (in.n + 15) / 16;
  uint16_t* b = b_buffer.get(size_t(RB * KC * 512));
  build_vnni(in, KC, RB, b);
  float* c = c_buffer.get(4 * 256);
  const bool few_rows = RB <= 2;
  // Few rows: 32 × kSpan weights per buffer, two buffers in turn (the next span decodes while
  // the tile unit still reads the last one).
  constexpr int64_t kSpan = 256;
  const int64_t span = K < kSpan ? K : kSpan, lda = few_rows ? span : K;
  uint16_t* a = a_buffer.get(size_t(2 * 32 * lda));
  for (int64_t m = m0; m < m1; m += 32) {
    const int64_t mf = m1 - m < 32 ? m1 - m : 32;
    for (int64_t f = mf; f < (mf + 15) / 16 * 16; ++f)  // rows of the last A tile past m1
      for (int64_t k = 0; k < lda; k += 32) {
        _mm512_store_si512(a + f * lda + k, _mm512_setzero_si512());
        _mm512_store_si512(a + 32 * lda + f * lda + k, _mm512_setzero_si512());
      }
    if (few_rows) {
      const TileStep step{mf > 16, RB > 1};
      zero_c();
      for (int64_t k0 = 0; k0 < K; k0 += span) {
        uint16_t* ab = a + ((k0 / span) & 1) * 32 * lda;
        const int64_t len = K - k0 < span ? K - k0 : span;
        // Each row is its own short stream (too many for the hardware prefetchers): fetch the
        // span after next of every row (at the end of a row, the next group's first spans).
        int64_t pm = m, pk = k0 + 2 * span;
        if (pk >= K) {
          pm += 32;
          pk -= K;
        }
        for (int64_t f = 0; f < 32 && pm + f < w.rows; ++f) prefetch_weights(w, pm + f, pk, span);
        for (int64_t f = 0; f < mf; ++f) decode(w, m + f, k0, len, ab + f * lda);
        for (int64_t k = 0; k < len; k += 32) {
          const int64_t kc = (k0 + k) / 32;
          step.run(ab + k, ab + 16 * lda + k, lda, b + kc * 512, b + (KC + kc) * 512);
        }
      }
      store_c(c, m, mf, 0, in.n, y, ldy, round);
      continue;
    }
    for (int64_t f = 0; f < mf; ++f) decode(w, m + f, 0, K, a + f * K);
    for (int64_t rb = 0; rb < RB; rb += 2) {
      const TileStep step{mf > 16, rb + 1 < RB};
      const uint16_t* b0 = b + rb * KC * 512;
      zero_c();
      for (int64_t kc = 0; kc < KC; ++kc) step.run(a + kc * 32, a + 16 * K + kc * 32, K, b0 + kc * 512, b0 + (KC + kc) * 512);
      store_c(c, m, mf, rb * 16, in.n, y, ldy, round);
    }
  }
}

}  // namespace

GemmKernel amx_gemm(const WeightView& w) {
  GemmKernel k;
  k.isa = CpuIsa::Amx;
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::FP8:
      if (K % 128 == 0) {
        k.layout = Layout::Bf16Unpack64;
        k.wants_scales = true;
        k.fold_scales = true;
        k.rows = amx_rows<fp8_decode_span>;
      }
      break;
    case WeightFormat::FP4:
      if (K % 128 == 0 && w.scale_cols == K / 32) {
        k.layout = Layout::Bf16PairSplit64;
        k.wants_scales = true;
        k.fold_scales = true;
        k.rows = amx_rows<fp4_decode_span>;
      }
      break;
    default: break;  // BF16 (the head: memory-bound, read best by the vector kernels), F32
  }
  return k;
}

}  // namespace dsv4::cpu
