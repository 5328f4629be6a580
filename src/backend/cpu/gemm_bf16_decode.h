// Weights decoded to bf16 by table lookups (AVX-512 VBMI/BW), shared by the vdpbf16ps kernels
// (gemm_bf16dot_avx512.cc) and the AMX kernels (gemm_amx.cc). Included inside each one's
// anonymous namespace (compiled once per instruction set).
//
// FP8: 64 codes per vpermi2b pair: one lookup gives each magnitude's bf16 high byte (then the
//   sign bit is OR-ed in), one the low byte; unpacking the two within 128-bit lanes makes 64
//   bf16 words in the Bf16Unpack64 order.
// FP4: see Fp4Row.

// bf16 encoding of e4m3 magnitude code c (exact: 3 mantissa bits; subnormal codes normalized).
constexpr uint16_t e4m3_bf16(int c) {
  const int e = c >> 3, m = c & 7;
  if (e > 0) return uint16_t(((e + 120) << 7) | (m << 4));
  if (m == 0) return 0;
  int exp = 118, mant = m;  // m · 2^-9
  while (mant < 8) {
    mant <<= 1;
    --exp;
  }
  exp += 3;  // mant in [8, 16): value = mant/8 · 2^(exp-127)
  return uint16_t((exp << 7) | ((mant & 7) << 4));
}

struct Fp8Tables {
  alignas(64) uint8_t hi[128], lo[128];
  constexpr Fp8Tables() : hi(), lo() {
    for (int c = 0; c < 128; ++c) {
      hi[c] = uint8_t(e4m3_bf16(c) >> 8);
      lo[c] = uint8_t(e4m3_bf16(c) & 0xFF);
    }
  }
};
constexpr Fp8Tables kFp8Tables;

class Fp8Decoder {
 public:
  Fp8Decoder()
      : hi0_(_mm512_load_si512(kFp8Tables.hi)), hi1_(_mm512_load_si512(kFp8Tables.hi + 64)),
        lo0_(_mm512_load_si512(kFp8Tables.lo)), lo1_(_mm512_load_si512(kFp8Tables.lo + 64)) {}

  // 64 codes at p → 64 bf16 words: w0 = codes 0-7, 16-23, 32-39, 48-55; w1 the others.
  void decode64(const uint8_t* p, __m512i& w0, __m512i& w1) const {
    const __m512i idx = _mm512_loadu_si512(p);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0_, idx, hi1_), idx,
                                                 _mm512_set1_epi8(int8_t(0x80)), 0xF8);
    const __m512i lo = _mm512_permutex2var_epi8(lo0_, idx, lo1_);
    w0 = _mm512_unpacklo_epi8(lo, hi);
    w1 = _mm512_unpackhi_epi8(lo, hi);
  }

 private:
  __m512i hi0_, hi1_, lo0_, lo1_;
};

// The bf16 words of the 16 e2m1 codes (0, .5, 1, 1.5, 2, 3, 4, 6, then their negatives), twice:
// words 0-15 serve the first block of a 64-column step, words 16-31 the second (Fp4Row; the
// vdpbf16ps FourBit kernel reads it as one table whose fifth index bit does not matter).
inline __m512i fp4_table() {
  return _mm512_setr_epi32(0x3F000000, 0x3FC03F80, 0x40404000, 0x40C04080, int32_t(0xBF008000),
                           int32_t(0xBFC0BF80), int32_t(0xC040C000), int32_t(0xC0C0C080), 0x3F000000, 0x3FC03F80,
                           0x40404000, 0x40C04080, int32_t(0xBF008000), int32_t(0xBFC0BF80), int32_t(0xC040C000),
                           int32_t(0xC0C0C080));
}

// One FP4 weight row decoded to bf16 with its block scales folded into the exponents: a block
// scale 2^(e-127) is added to the exponent field of every non-zero word (exact; the e2m1 values
// have exponents 126..129, so e is clamped to [2, 252], where no word leaves the normal range —
// smaller scales give products vdpbf16ps would flush anyway; e = 255 (NaN) makes the block's
// words NaN). A 64-column step (two 32-wide blocks, 32 bytes) gives the 32 even columns, then the
// 32 odd ones: the Bf16PairSplit64 order of the activations.
class Fp4Row {
 public:
  Fp4Row() = default;
  Fp4Row(const uint8_t* codes, const uint8_t* scales) : codes_(codes), scales_(scales) {}

  // Loads the scales of blocks [g, g + nb) (g a multiple of 32, nb ≤ 32 and even).
  void load_scales(int64_t g, int nb) {
    const __m512i e = _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(__mmask32((uint64_t(1) << nb) - 1), scales_ + g));
    nan_ = _mm512_cmpeq_epi16_mask(e, _mm512_set1_epi16(255));
    const __m512i c = _mm512_min_epu16(_mm512_max_epu16(e, _mm512_set1_epi16(2)), _mm512_set1_epi16(252));
    offsets_ = _mm512_slli_epi16(_mm512_sub_epi16(c, _mm512_set1_epi16(127)), 7);
  }

  // Columns [64·p, 64·p + 64) of the row, p = g/2 + j/2 (blocks g + j, g + j + 1).
  void decode_pair(int64_t g, int j, __m512i& even, __m512i& odd) const {
    const __m512i second = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0x00100010, 0x00100010, 0x00100010,
                                             0x00100010, 0x00100010, 0x00100010, 0x00100010, 0x00100010);
    const __m512i which = _mm512_add_epi16(_mm512_srli_epi16(second, 4), _mm512_set1_epi16(int16_t(j)));
    __m512i table = _mm512_mask_add_epi16(fp4_table(), __mmask32(0xFEFEFEFEu), fp4_table(),
                                          _mm512_permutexvar_epi16(which, offsets_));
    if (__builtin_expect(((nan_ >> j) & 3u) != 0, 0)) {
      const __mmask32 lanes = __mmask32(((nan_ >> j) & 1u ? 0x0000FFFFu : 0u) | ((nan_ >> j) & 2u ? 0xFFFF0000u : 0u));
      table = _mm512_mask_mov_epi16(table, lanes, _mm512_set1_epi16(0x7FC0));
    }
    const __m512i codes =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes_ + (g + j) * 16)));
    even = _mm512_permutexvar_epi16(_mm512_ternarylogic_epi32(codes, _mm512_set1_epi16(15), second, 0xEA), table);
    odd = _mm512_permutexvar_epi16(_mm512_or_si512(_mm512_srli_epi16(codes, 4), second), table);
  }

 private:
  const uint8_t* codes_ = nullptr;
  const uint8_t* scales_ = nullptr;
  __m512i offsets_ = _mm512_setzero_si512();
  uint32_t nan_ = 0;
};

