#include "core/number_formats.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace dsv4 {

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf/NaN
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00;                // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00;               // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                    // below 2^-14: subnormal or zero
    float v = std::bit_cast<float>(a);
    float q = std::nearbyint(v * 16777216.0f);              // multiples of 2^-24, RNE
    return sign | uint16_t(q);
  }
  a += 0xFFFu + ((a >> 13) & 1u);                           // RNE on 10 mantissa bits
  return sign | uint16_t(((a >> 13) - (112u << 10)) & 0x7FFF);
}

namespace {
std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) {
    int sign = c >> 7, exp = (c >> 3) & 15, mant = c & 7;
    float v;
    if (exp == 15 && mant == 7) v = std::numeric_limits<float>::quiet_NaN();
    else if (exp == 0) v = std::ldexp(float(mant), -9);
    else v = std::ldexp(1.0f + mant / 8.0f, exp - 7);
    t[c] = sign ? -v : v;
  }
  return t;
}
const std::array<float, 256> kE4m3Table = make_e4m3_table();
}  // namespace

float e4m3_to_f32(uint8_t code) { return kE4m3Table[code]; }

uint8_t f32_to_e4m3(float f) {
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7F;
  float a = std::fabs(f);
  if (a >= kFp8Max) return sign | 0x7E;
  float r = round_to_e4m3_grid(a);
  if (r == 0.0f) return sign;
  if (r < 0.015625f) return sign | uint8_t(std::lround(r * 512.0f));  // subnormal: m * 2^-9
  int e;
  float m = std::frexp(r, &e);  // r = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + 7;
  int mant = int(std::lround((m * 2.0f - 1.0f) * 8.0f));
  return sign | uint8_t(exp << 3) | uint8_t(mant);
}

uint8_t f32_to_e8m0(float f) {
  if (!(f > 0.0f) || std::isinf(f)) return 0xFF;
  int e;
  float m = std::frexp(f, &e);  // f = m * 2^e
  int b = (m == 0.5f ? e - 1 : e) + 127;
  if (b < 0) b = 0;
  if (b > 254) b = 254;
  return uint8_t(b);
}

uint8_t f32_to_e2m1(float f) {
  uint8_t sign = std::signbit(f) ? 8 : 0;
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 7;
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  if (a >= kFp4Max) return sign | 7;
  // Nearest grid value; at an exact midpoint pick the even code (its mantissa bit is 0).
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    float d_best = std::fabs(a - kValues[best]), d = std::fabs(a - kValues[c]);
    if (d < d_best || (d == d_best && (c & 1) == 0)) best = c;
  }
  return sign | uint8_t(best);
}

void dequantize_fp8_blocks(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                           float* out) {
  const int64_t scale_cols = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = e4m3_to_f32(w[r * cols + c]) *
                          e8m0_to_f32(scale[(r / kFp8Block) * scale_cols + c / kFp8Block]);
}

void dequantize_fp4_blocks(const uint8_t* w, const uint8_t* scale, int64_t rows, int64_t cols,
                           float* out) {
  const int64_t scale_cols = cols / kFp4Block;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = fp4_packed_at(w + r * (cols / 2), c) *
                          e8m0_to_f32(scale[r * scale_cols + c / kFp4Block]);
}

void fake_quant_fp8(float* x, int64_t n, int block) {
  const float inv_max = 1.0f / kFp8Max;  // the reference multiplies by the rounded inverse
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = pow2_ceil(std::max(amax, 1e-4f) * inv_max);
    for (int64_t i = b0; i < b1; ++i) {
      float v = std::clamp(x[i] / s, -kFp8Max, kFp8Max);
      x[i] = round_to_e4m3_grid(v) * s;
    }
  }
}

void quantize_int8_groups(const float* x, int64_t k, int64_t group, int8_t* q, float* scales) {
  for (int64_t g = 0; g * group < k; ++g) {
    const float* v = x + g * group;
    float amax = 0.0f;
    for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = amax > 0.0f && std::isfinite(amax) ? amax / 127.0f : 1.0f;
    scales[g] = s;
    for (int64_t i = 0; i < group; ++i) {
      const float r = std::nearbyint(v[i] / s);
      q[g * group + i] = r == r ? int8_t(std::clamp(r, -127.0f, 127.0f)) : int8_t(0);  // (NaN: 0)
    }
  }
}

float int2_w2a8_dot(const uint8_t* codes, const uint16_t* bf16_scales, const int8_t* x8, const float* x_scales,
                    int64_t k) {
  float acc = 0.0f;
  for (int64_t g = 0; g * 128 < k; ++g) {
    int32_t twice = 0;  // Σ (2q - 3)·x8: exact
    for (int64_t c = g * 128; c < g * 128 + 128; ++c) twice += (2 * ((codes[c / 4] >> (2 * (c & 3))) & 3) - 3) * x8[c];
    acc += (0.5f * float(twice)) * (bf16_to_f32(bf16_scales[g]) * x_scales[g]);
  }
  return acc;
}

void fake_quant_fp4(float* x, int64_t n, int block) {
  const float inv_max = 1.0f / kFp4Max;
  const float min_amax = kFp4Max * std::ldexp(1.0f, -126);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float s = pow2_ceil(std::max(amax, min_amax) * inv_max);
    for (int64_t i = b0; i < b1; ++i) {
      float v = std::clamp(x[i] / s, -kFp4Max, kFp4Max);
      x[i] = e2m1_to_f32(f32_to_e2m1(v)) * s;
    }
  }
}

}  // namespace dsv4
