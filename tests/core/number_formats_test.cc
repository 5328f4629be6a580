// Exhaustive and reference-checked tests of the number formats (core/number_formats.h).
// Each conversion is compared with an independent computation: double arithmetic,
// brute-force nearest-value search, or the hardware F16C instructions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <immintrin.h>
#include <limits>
#include <random>
#include <vector>

#include "core/number_formats.h"

namespace dsv4 {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// ---- bf16 -------------------------------------------------------------------

TEST(Bf16, AllCodesRoundTripThroughF32) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(uint16_t(h));
    EXPECT_EQ(bits(f), h << 16);
    if (std::isnan(f)) {
      const uint16_t back = f32_to_bf16(f);
      EXPECT_TRUE(std::isnan(bf16_to_f32(back))) << h;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << h;
    } else {
      EXPECT_EQ(f32_to_bf16(f), h) << "code 0x" << std::hex << h;
    }
  }
}

// Independent f32 -> bf16: pick the nearer of the two neighbouring bf16 values using
// double arithmetic; ties to the even code; beyond the largest finite value the upper
// neighbour is infinity, which IEEE rounding treats as 2^128.
uint16_t reference_bf16(float f) {
  const uint32_t u = bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7FFFFFFF;
  const uint16_t lo = uint16_t(a >> 16);
  if ((a & 0xFFFF) == 0) return sign | lo;
  const uint16_t hi = uint16_t(lo + 1);
  const double x = double(from_bits(a));
  const double vlo = double(from_bits(uint32_t(lo) << 16));
  const double vhi = hi == 0x7F80 ? std::ldexp(1.0, 128) : double(from_bits(uint32_t(hi) << 16));
  const double dlo = x - vlo, dhi = vhi - x;
  if (dlo < dhi) return sign | lo;
  if (dhi < dlo) return sign | hi;
  return sign | ((lo & 1) ? hi : lo);
}

TEST(Bf16, RoundToNearestEvenMatchesReference) {
  std::mt19937 rng(1);
  const uint32_t low_patterns[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x4000, 0xC000};
  int checked = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t hi = h << 16;
    if ((hi & 0x7F800000) == 0x7F800000) continue;  // inf / NaN handled below
    for (uint32_t low : low_patterns) {
      const float f = from_bits(hi | low);
      ASSERT_EQ(f32_to_bf16(f), reference_bf16(f)) << std::hex << (hi | low);
      ++checked;
    }
    const float f = from_bits(hi | (rng() & 0xFFFF));
    ASSERT_EQ(f32_to_bf16(f), reference_bf16(f)) << std::hex << bits(f);
  }
  EXPECT_GT(checked, 500000);
  // Ties go to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3F82);  // halfway between 0x3F81 and 0x3F82
  // Overflow: the largest finite bf16 plus half an ulp rounds to infinity.
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7F800001)))));  // NaN with a low payload only
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000)), 0x0000);  // subnormal tie -> even (zero)
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
}

// ---- f16 against the hardware conversion ------------------------------------

TEST(F16, DecodeMatchesF16cForAllCodes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ours = f16_to_f32(uint16_t(h));
    const float hw = _cvtsh_ss(uint16_t(h));
    if (std::isnan(hw)) {
      EXPECT_TRUE(std::isnan(ours)) << h;
      EXPECT_EQ(std::signbit(ours), std::signbit(hw)) << h;
    } else {
      EXPECT_EQ(bits(ours), bits(hw)) << "code 0x" << std::hex << h;
    }
  }
}

void expect_f16_encode_matches_hardware(float f) {
  const uint16_t ours = f32_to_f16(f);
  const uint16_t hw = uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
  if (std::isnan(f)) {
    EXPECT_TRUE(std::isnan(f16_to_f32(ours)));
    EXPECT_EQ(ours & 0x8000, hw & 0x8000);
  } else {
    ASSERT_EQ(ours, hw) << "f32 bits 0x" << std::hex << bits(f);
  }
}

TEST(F16, EncodeMatchesF16c) {
  // Every f16 value and its neighbourhood: exact values, midpoints, one f32 ulp around them.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const float v = _cvtsh_ss(uint16_t(h));
    const float next = _cvtsh_ss(uint16_t(h + 1));
    const float mid = float((double(v) + double(next)) / 2);
    for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      expect_f16_encode_matches_hardware(x);
      expect_f16_encode_matches_hardware(-x);
    }
  }
  std::mt19937 rng(2);
  for (int i = 0; i < 2000000; ++i) expect_f16_encode_matches_hardware(from_bits(rng()));
  std::uniform_real_distribution<float> near(-70000.0f, 70000.0f);
  for (int i = 0; i < 200000; ++i) expect_f16_encode_matches_hardware(near(rng));
  for (float x : {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, 1e10f, 5.960464e-8f, 2.9802322e-8f,
                  2.9802326e-8f, 1e-10f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()})
    expect_f16_encode_matches_hardware(x);
}

// ---- FP8 e4m3 ----------------------------------------------------------------

double e4m3_formula(int code) {
  const int sign = code >> 7, exp = (code >> 3) & 15, mant = code & 7;
  const double v = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(1.0 + mant / 8.0, exp - 7);
  return sign ? -v : v;
}

TEST(E4m3, DecodeAllCodes) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(uint8_t(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    EXPECT_EQ(double(v), e4m3_formula(c)) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 128) << c;
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

// The positive e4m3 values in increasing order (codes 0..126).
std::vector<double> e4m3_positive_values() {
  std::vector<double> v;
  for (int c = 0; c < 127; ++c) v.push_back(e4m3_formula(c));
  return v;
}

// Brute force: the nearest code, ties to the even code, saturating at 448.
uint8_t reference_e4m3(double x) {
  const std::vector<double> values = e4m3_positive_values();
  const double a = std::min(std::fabs(x), 448.0);
  int best = 0;
  for (int c = 1; c < 127; ++c) {
    const double d = std::fabs(a - values[size_t(c)]), db = std::fabs(a - values[size_t(best)]);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return uint8_t((std::signbit(x) ? 0x80 : 0) | best);
}

TEST(E4m3, EncodeRoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(c))), c) << "code " << c;
  }
}

TEST(E4m3, MidpointsRoundToEven) {
  const std::vector<double> v = e4m3_positive_values();
  for (size_t c = 0; c + 1 < v.size(); ++c) {
    const float mid = float((v[c] + v[c + 1]) / 2);  // exact in float
    ASSERT_EQ(double(mid), (v[c] + v[c + 1]) / 2);
    const uint8_t even = uint8_t((c & 1) == 0 ? c : c + 1);
    EXPECT_EQ(f32_to_e4m3(mid), even) << "between codes " << c << " and " << c + 1;
    EXPECT_EQ(f32_to_e4m3(-mid), 0x80 | even);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 1000.0f)), c + 1);
  }
}

TEST(E4m3, SaturatesAndKeepsNaN) {
  for (float x : {448.0f, 449.0f, 463.99f, 464.0f, 480.0f, 1e6f, 3e38f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(f32_to_e4m3(x), 0x7E) << x;
    EXPECT_EQ(f32_to_e4m3(-x), 0xFE) << x;
  }
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7F, 0x7F);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(-std::numeric_limits<float>::quiet_NaN()))));
}

TEST(E4m3, EncodeMatchesBruteForce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-500.0f, 500.0f);
  std::uniform_real_distribution<float> small(-0.03f, 0.03f);
  for (int i = 0; i < 200000; ++i) {
    const float x = (i & 1) ? wide(rng) : small(rng);
    ASSERT_EQ(f32_to_e4m3(x), reference_e4m3(x)) << x;
  }
  for (float x : {0.0f, -0.0f, 1e-30f, std::ldexp(1.0f, -10), std::ldexp(3.0f, -11), std::ldexp(1.0f, -6)})
    EXPECT_EQ(f32_to_e4m3(x), reference_e4m3(x)) << x;
}

TEST(E4m3, GridRoundingEqualsDecodeOfEncode) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> wide(-448.0f, 448.0f);
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  for (int i = 0; i < 500000; ++i) {
    const float x = (i % 3) ? wide(rng) : small(rng);
    ASSERT_EQ(round_to_e4m3_grid(x), e4m3_to_f32(f32_to_e4m3(x))) << x;
  }
  // The midpoints too, where the bit trick must round to even.
  const std::vector<double> v = e4m3_positive_values();
  for (size_t c = 0; c + 1 < v.size(); ++c) {
    const float mid = float((v[c] + v[c + 1]) / 2);
    EXPECT_EQ(round_to_e4m3_grid(mid), e4m3_to_f32(f32_to_e4m3(mid))) << mid;
  }
}

// ---- E8M0 and power-of-two scales -------------------------------------------------

TEST(E8m0, AllCodes) {
  for (int b = 0; b < 255; ++b) {
    const float v = e8m0_to_f32(uint8_t(b));
    EXPECT_EQ(double(v), std::ldexp(1.0, b - 127)) << b;
    EXPECT_EQ(f32_to_e8m0(v), b) << b;
  }
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xFF)));
  EXPECT_EQ(f32_to_e8m0(3.0f), 129);  // rounds up to 4
  EXPECT_EQ(f32_to_e8m0(0.0f), 0xFF);
  EXPECT_EQ(f32_to_e8m0(-1.0f), 0xFF);
}

TEST(Pow2Ceil, MatchesDoubleFormula) {
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(std::uniform_real_distribution<float>(0.5f, 1.0f)(rng), int(rng() % 200) - 100);
    EXPECT_EQ(double(pow2_ceil(x)), std::ldexp(1.0, int(std::ceil(std::log2(double(x)))))) << x;
  }
  for (int e = -100; e < 100; ++e) EXPECT_EQ(pow2_ceil(std::ldexp(1.0f, e)), std::ldexp(1.0f, e));
}

// ---- FP4 e2m1 ------------------------------------------------------------------

TEST(E2m1, AllCodesAndPacking) {
  const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const double expect = (c & 8) ? -values[c & 7] : values[c & 7];
    EXPECT_EQ(double(e2m1_to_f32(uint8_t(c))), expect) << c;
    EXPECT_EQ(std::signbit(e2m1_to_f32(uint8_t(c))), c >= 8) << c;
    EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(uint8_t(c))), c) << c;
  }
  // Low nibble = even column.
  const uint8_t row[2] = {0x71, 0xF9};  // columns: 1 -> 0.5, 7 -> 6, 9 -> -0.5, 15 -> -6
  EXPECT_EQ(fp4_packed_at(row, 0), 0.5f);
  EXPECT_EQ(fp4_packed_at(row, 1), 6.0f);
  EXPECT_EQ(fp4_packed_at(row, 2), -0.5f);
  EXPECT_EQ(fp4_packed_at(row, 3), -6.0f);
}

TEST(E2m1, EncodeRoundsToNearestEvenAndSaturates) {
  const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int c = 0; c < 7; ++c) {
    const float mid = float((values[c] + values[c + 1]) / 2);
    const int even = (c & 1) == 0 ? c : c + 1;
    EXPECT_EQ(f32_to_e2m1(mid), even) << mid;
    EXPECT_EQ(f32_to_e2m1(-mid), 8 | even) << mid;
    EXPECT_EQ(f32_to_e2m1(std::nextafter(mid, 0.0f)), c) << mid;
    EXPECT_EQ(f32_to_e2m1(std::nextafter(mid, 10.0f)), c + 1) << mid;
  }
  for (float x : {6.0f, 6.5f, 7.0f, 100.0f, std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(f32_to_e2m1(x), 7) << x;
    EXPECT_EQ(f32_to_e2m1(-x), 15) << x;
  }
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> dist(-7.0f, 7.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng);
    int best = 0;
    const double a = std::min(std::fabs(double(x)), 6.0);
    for (int c = 1; c < 8; ++c)
      if (std::fabs(a - values[c]) < std::fabs(a - values[best])) best = c;  // no exact ties at random
    ASSERT_EQ(f32_to_e2m1(x), (x < 0 ? 8 : 0) | best) << x;
  }
}

// ---- Block dequantization ---------------------------------------------------------

TEST(BlockDequant, Fp8TilesOnOddShape) {
  const int64_t rows = 130, cols = 200, srows = 2, scols = 2;
  std::mt19937 rng(7);
  std::vector<uint8_t> w(size_t(rows * cols)), scale(size_t(srows * scols));
  for (auto& c : w) do c = uint8_t(rng()); while ((c & 0x7F) == 0x7F);
  for (auto& s : scale) s = uint8_t(100 + rng() % 50);
  std::vector<float> out(size_t(rows * cols));
  dequantize_fp8_blocks(w.data(), scale.data(), rows, cols, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double expect = e4m3_formula(w[size_t(r * cols + c)]) *
                            std::ldexp(1.0, scale[size_t((r / 128) * scols + c / 128)] - 127);
      ASSERT_EQ(double(out[size_t(r * cols + c)]), expect) << r << "," << c;
    }
}

TEST(BlockDequant, Fp4BlocksOnOddShape) {
  const int64_t rows = 3, cols = 64;
  std::mt19937 rng(8);
  std::vector<uint8_t> w(size_t(rows * cols / 2)), scale(size_t(rows * cols / 32));
  for (auto& b : w) b = uint8_t(rng());
  for (auto& s : scale) s = uint8_t(110 + rng() % 30);
  std::vector<float> out(size_t(rows * cols));
  dequantize_fp4_blocks(w.data(), scale.data(), rows, cols, out.data());
  const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = w[size_t(r * cols / 2 + c / 2)];
      const int code = (c % 2 == 0) ? (byte & 15) : (byte >> 4);
      const double v = (code & 8) ? -values[code & 7] : values[code & 7];
      const double expect = v * std::ldexp(1.0, scale[size_t(r * 2 + c / 32)] - 127);
      ASSERT_EQ(double(out[size_t(r * cols + c)]), expect) << r << "," << c;
    }
}

// ---- Activation fake quantization -------------------------------------------------

// The spec's formula, computed independently: s = 2^ceil(log2(max(amax, floor) / max_code)),
// then the nearest grid value of clamp(x / s) (ties to even), times s.
std::vector<float> reference_fake_quant(const std::vector<float>& x, int block, bool fp8) {
  std::vector<float> out(x.size());
  const double max_code = fp8 ? 448.0 : 6.0;
  const double floor_amax = fp8 ? 1e-4 : 6.0 * std::ldexp(1.0, -126);
  for (size_t b0 = 0; b0 < x.size(); b0 += size_t(block)) {
    const size_t b1 = std::min(x.size(), b0 + size_t(block));
    double amax = 0;
    for (size_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(double(x[i])));
    const double s = std::ldexp(1.0, int(std::ceil(std::log2(std::max(amax, floor_amax) / max_code))));
    for (size_t i = b0; i < b1; ++i) {
      const double v = std::clamp(double(x[i]) / s, -max_code, max_code);
      double q;
      if (fp8) {
        q = e4m3_formula(reference_e4m3(v));
      } else {
        const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
        int best = 0;
        for (int c = 1; c < 8; ++c) {
          const double d = std::fabs(std::fabs(v) - values[c]), db = std::fabs(std::fabs(v) - values[best]);
          if (d < db || (d == db && (c & 1) == 0)) best = c;
        }
        q = v < 0 ? -values[best] : values[best];
      }
      out[i] = float(q * s);
    }
  }
  return out;
}

TEST(FakeQuant, Fp8MatchesSpecFormula) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const int block = (trial % 2) ? 128 : 64;
    const size_t n = size_t(1 + rng() % 700);
    const float spread = std::ldexp(1.0f, int(rng() % 40) - 20);
    std::normal_distribution<float> dist(0.0f, spread);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    if (trial % 7 == 0) std::fill(x.begin(), x.begin() + long(std::min<size_t>(n, 64)), 0.0f);  // zero blocks
    const std::vector<float> expect = reference_fake_quant(x, block, true);
    fake_quant_fp8(x.data(), int64_t(n), block);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], expect[i]) << "trial " << trial << " index " << i;
  }
}

TEST(FakeQuant, Fp4MatchesSpecFormula) {
  std::mt19937 rng(10);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = size_t(1 + rng() % 500);
    const float spread = std::ldexp(1.0f, int(rng() % 40) - 20);
    std::normal_distribution<float> dist(0.0f, spread);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    const std::vector<float> expect = reference_fake_quant(x, 32, false);
    fake_quant_fp4(x.data(), int64_t(n), 32);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], expect[i]) << "trial " << trial << " index " << i;
  }
}

TEST(FakeQuant, BlockMaximumAtPowerOfTwoBoundary) {
  // amax exactly 448 * 2^k: the scale is exactly 2^k and the maximum keeps its code 448.
  for (int k = -10; k <= 10; ++k) {
    std::vector<float> x(128, 0.0f);
    x[0] = std::ldexp(448.0f, k);
    x[1] = std::ldexp(1.0f, k);
    fake_quant_fp8(x.data(), 128, 128);
    EXPECT_EQ(x[0], std::ldexp(448.0f, k)) << k;
    EXPECT_EQ(x[1], std::ldexp(1.0f, k)) << k;
  }
}

}  // namespace
}  // namespace dsv4

// INT2 products are W2A8: int8 per 128 inputs with s = amax / 127, round half to even, and each
// group's Σ (q − 1.5)·x8 scaled by weight scale × activation scale — checked on values whose
// quantization is known in closed form.
namespace dsv4 {
namespace {
TEST(Int2W2A8, Int8GroupsAndTheirProductAreTheDefinition) {
  std::vector<float> x(256);
  for (int i = 0; i < 128; ++i) x[size_t(i)] = float(i - 64) * 0.5f;  // amax 32: s = 32/127
  x[0] = -32.0f;                                                       // (i = 0 gives -32 already)
  for (int i = 128; i < 256; ++i) x[size_t(i)] = 0.0f;                 // an all-zero group: s = 1
  std::vector<int8_t> q(256);
  float s[2];
  quantize_int8_groups(x.data(), 256, 128, q.data(), s);
  EXPECT_EQ(s[0], 32.0f / 127.0f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[64], 0);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(q[size_t(i)], int8_t(std::nearbyint(x[size_t(i)] / s[0]))) << i;
  for (int i = 128; i < 256; ++i) EXPECT_EQ(q[size_t(i)], 0);
  // Codes all 3 (level +1.5) with scale 2 in group 0: 1.5 · 2 · s0 · Σ q.
  std::vector<uint8_t> codes(64, 0xFF);
  const uint16_t scales[2] = {f32_to_bf16(2.0f), f32_to_bf16(4.0f)};
  int32_t sum = 0;
  for (int i = 0; i < 128; ++i) sum += q[size_t(i)];
  EXPECT_FLOAT_EQ(int2_w2a8_dot(codes.data(), scales, q.data(), s, 256), 3.0f * s[0] * float(sum));
  EXPECT_EQ(int2_packed_at(codes.data(), 5), 1.5f);
  codes[1] = 0x1B;  // columns 4..7: q = 3, 2, 1, 0
  EXPECT_EQ(int2_packed_at(codes.data(), 4), 1.5f);
  EXPECT_EQ(int2_packed_at(codes.data(), 5), 0.5f);
  EXPECT_EQ(int2_packed_at(codes.data(), 6), -0.5f);
  EXPECT_EQ(int2_packed_at(codes.data(), 7), -1.5f);
}
}  // namespace
}  // namespace dsv4
