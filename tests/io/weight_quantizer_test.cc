// The bulk encoders of make-checkpoint (checkpoint/weight_quantizer.h) against the
// reference conversions of core/number_formats.h, and the random streams.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "checkpoint/random_stream.h"
#include "checkpoint/weight_quantizer.h"
#include "core/number_formats.h"

namespace dsv4 {
namespace {

TEST(WeightQuantizer, E4m3EncoderMatchesReference) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> wide(-448.0f, 448.0f), small(-0.05f, 0.05f);
  for (int i = 0; i < 300000; ++i) {
    const float x = (i % 3) ? wide(rng) : small(rng);
    ASSERT_EQ(encode_e4m3_in_range(x), f32_to_e4m3(x)) << x;
  }
  for (int c = 0; c < 127; ++c) {  // every value and every midpoint
    const float v = e4m3_to_f32(uint8_t(c));
    EXPECT_EQ(encode_e4m3_in_range(v), c);
    EXPECT_EQ(encode_e4m3_in_range(-v), 0x80 | c);
    if (c < 126) {
      const float mid = (v + e4m3_to_f32(uint8_t(c + 1))) / 2;
      EXPECT_EQ(encode_e4m3_in_range(mid), f32_to_e4m3(mid)) << mid;
    }
  }
}

TEST(WeightQuantizer, E2m1EncoderMatchesReference) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-7.0f, 7.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng);
    ASSERT_EQ(encode_e2m1_rne(x), f32_to_e2m1(x)) << x;
  }
  for (float x : {0.0f, -0.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 100.0f, -0.25f, -5.0f})
    EXPECT_EQ(encode_e2m1_rne(x), f32_to_e2m1(x)) << x;
}

TEST(WeightQuantizer, BlockScaleIsThePowerOfTwoRule) {
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const float amax = std::ldexp(std::uniform_real_distribution<float>(0.5f, 1.0f)(rng), int(rng() % 120) - 60);
    for (float max_code : {448.0f, 6.0f}) {
      const uint8_t s = block_scale_e8m0(amax, max_code);
      ASSERT_EQ(s, f32_to_e8m0(pow2_ceil(amax / max_code))) << amax;
      const float q = amax / e8m0_to_f32(s);
      ASSERT_LE(q, max_code);
      ASSERT_GT(q, max_code / 2);
    }
  }
  EXPECT_EQ(block_scale_e8m0(0.0f, 448.0f), 127);  // all-zero tile: 2^0
  EXPECT_EQ(block_scale_e8m0(448.0f, 448.0f), 127);
  EXPECT_EQ(block_scale_e8m0(449.0f, 448.0f), 128);
}

TEST(WeightQuantizer, Fp8StripeOnOddWidth) {
  const int64_t rows = 100, cols = 200;  // a partial stripe and a partial tile
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> x(size_t(rows * cols));
  for (auto& v : x) v = dist(rng);
  for (int64_t r = 0; r < rows; ++r) x[size_t(r * cols + 150)] = 0.0f;
  std::vector<uint8_t> codes(x.size()), scales(2);
  quantize_fp8_stripe(x.data(), rows, cols, codes.data(), scales.data());
  for (int tile = 0; tile < 2; ++tile) {
    float amax = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = tile * 128; c < std::min<int64_t>(cols, tile * 128 + 128); ++c)
        amax = std::max(amax, std::fabs(x[size_t(r * cols + c)]));
    EXPECT_EQ(scales[size_t(tile)], f32_to_e8m0(pow2_ceil(amax / 448.0f)));
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = e8m0_to_f32(scales[size_t(c / 128)]);
      ASSERT_EQ(codes[size_t(r * cols + c)], f32_to_e4m3(x[size_t(r * cols + c)] / s)) << r << "," << c;
    }
  // The identity with a fixed scale 2^0: code 0x38 = 1.0 on the diagonal.
  std::vector<float> eye(128 * 128, 0.0f);
  for (int i = 0; i < 128; ++i) eye[size_t(i * 129)] = 1.0f;
  std::vector<uint8_t> eye_codes(eye.size()), eye_scale(1);
  quantize_fp8_stripe_fixed(eye.data(), 128, 128, 0, eye_codes.data(), eye_scale.data());
  EXPECT_EQ(eye_scale[0], 127);
  EXPECT_EQ(eye_codes[0], 0x38);
  EXPECT_EQ(eye_codes[1], 0x00);
}

TEST(WeightQuantizer, Fp4RowsPackLowNibbleEven) {
  const int64_t rows = 3, cols = 96;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(size_t(rows * cols));
  for (auto& v : x) v = dist(rng);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
  std::vector<uint8_t> packed(size_t(rows * cols / 2)), scales(size_t(rows * cols / 32));
  quantize_fp4_rows(x.data(), rows, cols, packed.data(), scales.data());
  EXPECT_EQ(scales[1], 127);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t s = scales[size_t(r * cols / 32 + c / 32)];
      float amax = 0;
      for (int64_t k = c / 32 * 32; k < c / 32 * 32 + 32; ++k) amax = std::max(amax, std::fabs(x[size_t(r * cols + k)]));
      ASSERT_EQ(s, amax > 0 ? f32_to_e8m0(pow2_ceil(amax / 6.0f)) : 127);
      const uint8_t byte = packed[size_t(r * cols / 2 + c / 2)];
      const uint8_t code = (c % 2 == 0) ? (byte & 15) : (byte >> 4);
      ASSERT_EQ(code, f32_to_e2m1(x[size_t(r * cols + c)] / e8m0_to_f32(s))) << r << "," << c;
    }
}

TEST(WeightQuantizer, Bf16EncoderMatchesReference) {
  std::mt19937 rng(6);
  std::vector<float> x(1000 + 7);
  for (auto& v : x) v = std::bit_cast<float>(uint32_t(rng()));
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[4] = std::numeric_limits<float>::infinity();
  x[5] = -0.0f;
  x[6] = std::bit_cast<float>(0x3F808000u);  // a tie
  std::vector<uint8_t> out(x.size() * 2);
  encode_bf16(x.data(), int64_t(x.size()), out.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t h = uint16_t(out[2 * i] | (out[2 * i + 1] << 8));
    ASSERT_EQ(h, f32_to_bf16(x[i])) << i;
  }
}

TEST(RandomStream, DeterministicAndKeyed) {
  std::vector<float> a(1003), b(1003), c(1003), d(1003), e(1003);
  RandomStream(7, "w", 3).normal(a.data(), a.size(), 0, 1);
  RandomStream(7, "w", 3).normal(b.data(), b.size(), 0, 1);
  RandomStream(8, "w", 3).normal(c.data(), c.size(), 0, 1);
  RandomStream(7, "v", 3).normal(d.data(), d.size(), 0, 1);
  RandomStream(7, "w", 4).normal(e.data(), e.size(), 0, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_NE(a, e);
}

TEST(RandomStream, NormalAndUniformMoments) {
  const size_t n = 1 << 20;
  std::vector<float> v(n);
  RandomStream rng(1, "moments", 0);
  rng.normal(v.data(), n, 2.0f, 0.5f);
  double sum = 0, sq = 0, amax = 0;
  for (float x : v) {
    sum += x;
    sq += double(x - 2.0f) * (x - 2.0f);
    amax = std::max(amax, std::fabs(double(x) - 2.0));
  }
  EXPECT_NEAR(sum / n, 2.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n), 0.5, 0.002);
  EXPECT_LE(amax, 0.5 * std::sqrt(12.0) + 1e-3);  // Irwin-Hall(4) is bounded by 2*sqrt(3) sigma
  rng.uniform(v.data(), n, -1.0f, 3.0f);
  sum = 0;
  float lo = 10, hi = -10;
  for (float x : v) {
    sum += x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_NEAR(sum / n, 1.0, 0.01);
  EXPECT_GE(lo, -1.0f);
  EXPECT_LT(hi, 3.0f);
  // Scalar draws below n are in range and cover it.
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 1000; ++i) seen[size_t(rng.below(10))]++;
  for (int s : seen) EXPECT_GT(s, 50);
}

}  // namespace
}  // namespace dsv4
