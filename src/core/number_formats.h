// Number formats of DeepSeek-V4 checkpoints and of the reference's activation
// simulation: bf16, f16, FP8 e4m3fn, E8M0 scales and FP4 e2m1.
//
// Conversions to f32 are exact. Conversions from f32 round to nearest, ties to
// even; FP8/FP4 encoders saturate to the format's largest finite value.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace dsv4 {

// ---- bf16 -------------------------------------------------------------------
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// The value the reference holds after storing f in a bf16 tensor.
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// ---- f16 --------------------------------------------------------------------
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// ---- FP8 e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no inf, NaN = S.1111.111
constexpr float kFp8Max = 448.0f;
float e4m3_to_f32(uint8_t code);  // table lookup, exact
uint8_t f32_to_e4m3(float f);     // RNE, saturating to +-448, NaN -> 0x7F|sign

// Rounds v (|v| <= 448, already scaled) to the nearest e4m3 value, ties to even.
// Bit trick usable in vector code: normal numbers keep 3 mantissa bits; values below
// 2^-6 (subnormal in e4m3) round to multiples of 2^-9.
inline float round_to_e4m3_grid(float v) {
  float a = std::fabs(v);
  float r;
  if (a < 0.015625f) {  // 2^-6
    const float magic = 16384.0f;  // ulp(2^14) == 2^-9
    r = (a + magic) - magic;
  } else {
    uint32_t u = std::bit_cast<uint32_t>(a);
    u += 0x7FFFFu + ((u >> 20) & 1u);
    u &= 0xFFF00000u;
    r = std::bit_cast<float>(u);
  }
  return std::copysign(r, v);
}

// ---- E8M0 scales: 2^(b-127), 0xFF = NaN --------------------------------------
inline float e8m0_to_f32(uint8_t b) {
  if (b == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  if (b == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127 (subnormal)
  return std::bit_cast<float>(uint32_t(b) << 23);
}
// Exact for powers of two in [2^-127, 2^127]; other values round up to the next power of two.
uint8_t f32_to_e8m0(float f);

// ---- FP4 e2m1: codes 0..7 = 0,0.5,1,1.5,2,3,4,6; codes 8..15 the negatives --------
constexpr float kFp4Max = 6.0f;
inline float e2m1_to_f32(uint8_t code) {
  static constexpr float kTable[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kTable[code & 15];
}
uint8_t f32_to_e2m1(float f);  // RNE, saturating to +-6
// Packed FP4: two codes per byte, the low nibble holds the even column.
inline float fp4_packed_at(const uint8_t* row, int64_t col) {
  uint8_t b = row[col >> 1];
  return e2m1_to_f32((col & 1) ? (b >> 4) : (b & 15));
}

// ---- Power-of-two scales of the reference's activation quantization ------------
// 2^ceil(log2(x)) for x > 0, computed on the float bits as the reference kernels do.
inline float pow2_ceil(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  int32_t e = int32_t((u >> 23) & 0xFF) - 127 + ((u & 0x7FFFFF) != 0 ? 1 : 0);
  return std::ldexp(1.0f, e);
}

// ---- Block dequantization of weights -------------------------------------------
constexpr int kFp8Block = 128;  // FP8 weights: one E8M0 scale per 128x128 tile
constexpr int kFp4Block = 32;   // FP4 weights: one E8M0 scale per 32 inputs of a row
constexpr int kNvfp4Block = 16; // NVFP4 weights: one E4M3 scale per 16 inputs of a row (times a global scale)
constexpr int kInt4Group = 128; // INT4 weights (W4A16): one BF16 scale per 128 inputs of a row
constexpr int kInt2Group = 128; // INT2 weights (the draft head's copy): one BF16 scale per 128 inputs of a row

// INT4 (compressed-tensors pack-quantized): int32 word j of a row holds columns 8j..8j+7, column
// 8j+i in bits 4i..4i+3; the value is (q - 8) times the group's scale.
inline float int4_packed_at(const uint8_t* row, int64_t col) {
  const uint8_t byte = row[col / 2];  // little-endian words: bits 4i..4i+3 of word j = nibble i
  return float(int((col & 1) ? byte >> 4 : byte & 15) - 8);
}

// INT2: byte j of a row holds columns 4j..4j+3, column 4j+i in bits 2i..2i+1; the value is
// (q - 1.5) times the group's scale (the four levels ±0.5, ±1.5: a symmetric quantizer of a
// bell-shaped row spends no level on an exact zero). INT2 products are W2A8: the activations are
// quantized to int8 per group of 128 (quantize_int8_groups) and each group's sum
// Σ (q - 1.5)·x8, exact in integers, is scaled by (weight scale × activation scale).
inline float int2_packed_at(const uint8_t* row, int64_t col) {
  return float((row[col / 4] >> (2 * (col & 3))) & 3) - 1.5f;
}

// Symmetric int8 per group of `group` inputs (k % group == 0): s = amax / 127 (1 for an all-zero
// group), q = clamp(round_half_even(x / s), -127, 127). q: k values; scales: k / group.
void quantize_int8_groups(const float* x, int64_t k, int64_t group, int8_t* q, float* scales);
// One INT2 output: Σ_g (w_scale[g] · x_scale[g]) · Σ_{c in g} (q_c - 1.5)·x8_c, groups of 128 in
// order (the definition the kernels are tested against). codes: the weight row's packed bytes.
float int2_w2a8_dot(const uint8_t* codes, const uint16_t* bf16_scales, const int8_t* x8, const float* x_scales,
                    int64_t k);

// w: [rows, cols] e4m3 codes; scale: [ceil(rows/128), ceil(cols/128)] E8M0; out: [rows, cols]
void dequantize_fp8_blocks(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                           float* out);
// w: [rows, cols/2] packed e2m1; scale: [rows, cols/32] E8M0; out: [rows, cols]
void dequantize_fp4_blocks(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                           float* out);

// ---- Activation fake quantization (quantize, then dequantize in place) ---------
// FP8 per block of `block` values: s = 2^ceil(log2(max(amax,1e-4)/448)), v = e4m3(clamp(x/s)) * s.
void fake_quant_fp8(float* x, int64_t n, int block);
// FP4 per block of `block` values: s = 2^ceil(log2(max(amax, 6*2^-126)/6)), v = e2m1(clamp(x/s)) * s.
void fake_quant_fp4(float* x, int64_t n, int block);

}  // namespace dsv4
