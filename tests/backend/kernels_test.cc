// The CPU product kernels (gemm_avx2.cc, gemm_avx512.cc) against the scalar reference
// (gemm_rows_reference), on every instruction set this machine has:
// - every weight format (FP8 with and without activation quantization, FP4, NVFP4, FP8 with float
//   scales, INT4, INT2, BF16, F32) over
//   odd shapes (K = 128, 384, 2176 — INT2: 256, 768, 2304; M = 1, 19, 111, 989; n = 1..9 and 41
//   rows), within a tolerance
//   computed from the data: two fp32 sums of the same K exact products differ by at most
//   2·K·u·Σ|x·w| (u = 2^-24), plus one bf16 rounding step when the output is rounded;
// - batch invariance: n rows in one call equal n one-row calls, and any split of the outputs
//   over calls (threads) gives the same bits;
// - the vectorized activation quantizer equals the reference bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/simd.h"
#include "backend/op_compare.h"
#include "core/number_formats.h"
#include "support/cpu_isas.h"

namespace dsv4::cpu {
namespace {

struct TestWeight {
  std::vector<uint8_t> data, scale;
  WeightView view;
};

TestWeight make_weight(WeightFormat f, int64_t M, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  TestWeight t;
  WeightView& w = t.view;
  w.format = f;
  w.rows = M;
  w.cols = K;
  switch (f) {
    case WeightFormat::FP8: {
      t.data.resize(size_t(M * K));
      for (auto& b : t.data) {
        do b = uint8_t(rng()); while ((b & 0x7F) == 0x7F);  // no NaN codes
      }
      w.scale_cols = (K + 127) / 128;
      t.scale.resize(size_t((M + 127) / 128 * w.scale_cols));
      for (auto& s : t.scale) s = uint8_t(118 + rng() % 12);
      break;
    }
    case WeightFormat::FP4: {
      t.data.resize(size_t(M * K / 2));
      for (auto& b : t.data) b = uint8_t(rng());
      w.scale_cols = K / 32;
      t.scale.resize(size_t(M * w.scale_cols));
      for (auto& s : t.scale) s = uint8_t(120 + rng() % 10);
      break;
    }
    case WeightFormat::NVFP4: {  // e4m3 scales per 16 (no NaN codes) × a global scale that is no power of two
      t.data.resize(size_t(M * K / 2));
      for (auto& b : t.data) b = uint8_t(rng());
      w.scale_cols = K / 16;
      t.scale.resize(size_t(M * w.scale_cols));
      for (auto& s : t.scale) s = uint8_t(0x08 + rng() % 0x60);
      w.global_scale = 0.0123f;
      break;
    }
    case WeightFormat::FP8F: {  // f32 multipliers per 128×128 tile
      t.data.resize(size_t(M * K));
      for (auto& b : t.data) {
        do b = uint8_t(rng()); while ((b & 0x7F) == 0x7F);
      }
      w.scale_cols = (K + 127) / 128;
      const int64_t n = (M + 127) / 128 * w.scale_cols;
      t.scale.resize(size_t(n * 4));
      for (int64_t i = 0; i < n; ++i) {
        const float v = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, -int(rng() % 6) - 6);
        std::memcpy(t.scale.data() + i * 4, &v, 4);
      }
      break;
    }
    case WeightFormat::INT4: {  // bf16 scales per 128
      t.data.resize(size_t(M * K / 2));
      for (auto& b : t.data) b = uint8_t(rng());
      w.scale_cols = K / 128;
      t.scale.resize(size_t(M * w.scale_cols * 2));
      for (int64_t i = 0; i < M * w.scale_cols; ++i) {
        const uint16_t h = f32_to_bf16(std::ldexp(1.0f + float(rng() % 100) / 100.0f, -int(rng() % 4) - 5));
        std::memcpy(t.scale.data() + i * 2, &h, 2);
      }
      break;
    }
    case WeightFormat::INT2: {  // bf16 scales per 128
      t.data.resize(size_t(M * K / 4));
      for (auto& b : t.data) b = uint8_t(rng());
      w.scale_cols = K / 128;
      t.scale.resize(size_t(M * w.scale_cols * 2));
      for (int64_t i = 0; i < M * w.scale_cols; ++i) {
        const uint16_t h = f32_to_bf16(std::ldexp(1.0f + float(rng() % 100) / 100.0f, -int(rng() % 4) - 5));
        std::memcpy(t.scale.data() + i * 2, &h, 2);
      }
      break;
    }
    case WeightFormat::BF16: {
      t.data.resize(size_t(M * K * 2));
      auto* h = reinterpret_cast<uint16_t*>(t.data.data());
      for (int64_t i = 0; i < M * K; ++i) h[i] = f32_to_bf16(normal(rng) * 0.05f);
      break;
    }
    default: {
      t.data.resize(size_t(M * K * 4));
      auto* v = reinterpret_cast<float*>(t.data.data());
      for (int64_t i = 0; i < M * K; ++i) v[i] = normal(rng) * 0.05f;
      break;
    }
  }
  w.data = t.data.data();
  w.scale = t.scale.empty() ? nullptr : t.scale.data();
  return t;
}

// Activations with a spread of magnitudes (and some zeros), bf16 values as in the model.
std::vector<float> make_input(int64_t n, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(n * K));
  for (auto& v : x) {
    const uint64_t r = rng() % 16;
    v = r == 0 ? 0.0f : round_bf16(normal(rng) * std::ldexp(1.0f, int(r % 8) - 3));
  }
  return x;
}

using test::weight_value;  // (op_compare.h: codes times their scales, every format)

struct Product {
  std::vector<float> y, bound;  // [n, M] results and allowed |difference|
};

// The reference result and, per output, 2·K·u·Σ|x·w| (x as the kernels see it: quantized).
Product reference(const std::vector<float>& x, int64_t n, const WeightView& w, bool quantize, bool round) {
  const int64_t K = w.cols, M = w.rows;
  std::vector<float> xq(x), sx;
  PreparedInput in{x.data(), nullptr, nullptr, n, K, K, 0};
  if (quantize) {
    sx.resize(size_t(n * K / 128));
    quantize_activations_reference(x.data(), n, K, xq.data(), sx.data());
    in = {xq.data(), nullptr, sx.data(), n, K, K, K / 128};
  }
  Product p;
  p.y.resize(size_t(n * M));
  p.bound.resize(size_t(n * M));
  std::vector<float> scratch(static_cast<size_t>(K));
  gemm_rows_reference(in, w, 0, M, p.y.data(), M, round, scratch.data());
  const double u = std::ldexp(1.0, -24);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xv = quantize ? double(xq[size_t(r * K + k)]) * sx[size_t(r * (K / 128) + k / 128)]
                                   : double(x[size_t(r * K + k)]);
        s += std::fabs(xv * weight_value(w, m, k));
      }
      double b = 2.0 * double(K) * u * s;
      if (round) b += std::fabs(p.y[size_t(r * M + m)]) * std::ldexp(1.0, -7) + b;  // one bf16 ulp apart
      p.bound[size_t(r * M + m)] = float(b) + 1e-30f;
    }
  return p;
}

std::vector<float> run_kernel(const GemmKernel& k, const std::vector<float>& x, int64_t n, const WeightView& w,
                              bool quantize, bool round, int64_t m_split = 0) {
  ActivationBuffer buf;
  const PreparedInput in = buf.prepare(k, x.data(), n, w.cols, w.cols, quantize);
  std::vector<float> y(size_t(n * w.rows), -1.0f);
  if (m_split <= 0) {
    k.rows(in, w, 0, w.rows, y.data(), w.rows, round);
  } else {
    for (int64_t m = 0; m < w.rows; m += m_split) k.rows(in, w, m, std::min(w.rows, m + m_split), y.data(), w.rows, round);
  }
  return y;
}

using test::simd_isas;

// INT2 (the draft head's copy) has a kernel only beside vdpbf16ps (and vpdpbusd), for K a multiple of 256;
// elsewhere the CPU backend multiplies it with the scalar reference.
bool has_kernel(CpuIsa isa, WeightFormat f) {
  return f != WeightFormat::INT2 || ((isa == CpuIsa::Avx512Bf16 || isa == CpuIsa::Amx) && cpu_features().avx512_vnni);
}
std::vector<int64_t> odd_depths(WeightFormat f) {
  if (f == WeightFormat::INT2) return {256, 768, 2048 + 256};
  return {128, 384, 2048 + 128};
}

// The instruction set's own kernel (falling back to the next lower set for formats it leaves out).
GemmKernel kernel_for(CpuIsa isa, const WeightView& w) {
  if (isa == CpuIsa::Amx) {
    GemmKernel k = amx_gemm(w);
    if (k.rows) return k;
  }
  if (isa == CpuIsa::Avx512Bf16 || isa == CpuIsa::Amx) {
    GemmKernel k = avx512bf16_gemm(w);
    if (k.rows) return k;
  }
  return isa == CpuIsa::Avx2 ? avx2_gemm(w) : avx512_gemm(w);
}

struct Format {
  const char* name;
  WeightFormat format;
  bool quantize;
};
const Format kFormats[] = {{"fp8", WeightFormat::FP8, true},
                           {"fp8_unquantized", WeightFormat::FP8, false},
                           {"fp4", WeightFormat::FP4, true},
                           {"nvfp4", WeightFormat::NVFP4, true},
                           {"nvfp4_unquantized", WeightFormat::NVFP4, false},
                           {"fp8f", WeightFormat::FP8F, true},
                           {"int4", WeightFormat::INT4, false},
                           {"int2", WeightFormat::INT2, false},
                           {"bf16", WeightFormat::BF16, false},
                           {"f32", WeightFormat::F32, false}};

class GemmKernelTest : public ::testing::TestWithParam<Format> {};

TEST_P(GemmKernelTest, MatchesReferenceOverOddShapes) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD instruction set on this machine";
  const Format& f = GetParam();
  constexpr int64_t kRows = 9;
  int64_t isas_run = 0;
  for (int64_t K : odd_depths(f.format))
    for (int64_t M : {1, 19, 111, 989}) {
      const TestWeight tw = make_weight(f.format, M, K, uint64_t(K * 1000 + M));
      const std::vector<float> x = make_input(kRows, K, uint64_t(K + M));
      for (bool round : {false, true}) {
        const Product ref = reference(x, kRows, tw.view, f.quantize, round);
        for (CpuIsa isa : simd_isas()) {
          if (!has_kernel(isa, f.format)) continue;
          const GemmKernel k = kernel_for(isa, tw.view);
          ASSERT_NE(k.rows, nullptr) << f.name << " K=" << K << " on " << isa_name(isa);
          ++isas_run;
          for (int64_t n = 1; n <= kRows; ++n) {
            const std::vector<float> y = run_kernel(k, x, n, tw.view, f.quantize, round);
            int64_t bad = 0, first_bad = -1;
            for (int64_t i = 0; i < n * M; ++i)
              if (!(std::fabs(y[size_t(i)] - ref.y[size_t(i)]) <= ref.bound[size_t(i)]) && bad++ == 0) first_bad = i;
            ASSERT_EQ(bad, 0) << f.name << " on " << isa_name(isa) << ": K=" << K << " M=" << M << " n=" << n
                              << " round=" << round << " output " << first_bad << ": " << y[size_t(first_bad)]
                              << " vs " << ref.y[size_t(first_bad)] << " ± " << ref.bound[size_t(first_bad)];
          }
        }
      }
    }
  if (isas_run == 0) GTEST_SKIP() << f.name << ": no kernel on this machine's instruction sets";
}

// Inputs wider than the FP8 kernels' stack buffer holds for their fewest rows (DeepSeek-V4-Flash-0731's
// DSpark main_proj: 3 x 4096 = 12288 inputs; the AVX2 buffer holds 4 rows of 8192): the same results.
TEST_P(GemmKernelTest, WideInputsMatchTheReference) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD instruction set on this machine";
  const Format& f = GetParam();
  if (f.format != WeightFormat::FP8 && f.format != WeightFormat::FP8F) GTEST_SKIP() << "buffered kernels are FP8's";
  for (int64_t K : {int64_t(12288), int64_t(16384 + 128)}) {
    const int64_t M = 19, kRows = 6;
    const TestWeight tw = make_weight(f.format, M, K, uint64_t(K + 3));
    const std::vector<float> x = make_input(kRows, K, uint64_t(K + 5));
    const Product ref = reference(x, kRows, tw.view, f.quantize, true);
    for (CpuIsa isa : simd_isas()) {
      if (!has_kernel(isa, f.format)) continue;
      const GemmKernel k = kernel_for(isa, tw.view);
      ASSERT_NE(k.rows, nullptr) << f.name << " K=" << K << " on " << isa_name(isa);
      for (int64_t n = 1; n <= kRows; ++n) {
        const std::vector<float> y = run_kernel(k, x, n, tw.view, f.quantize, true);
        for (int64_t i = 0; i < n * M; ++i)
          ASSERT_LE(std::fabs(y[size_t(i)] - ref.y[size_t(i)]), ref.bound[size_t(i)])
              << f.name << " on " << isa_name(isa) << ": K=" << K << " n=" << n << " output " << i;
      }
    }
  }
}

TEST_P(GemmKernelTest, RowsAndOutputSplitsDoNotChangeBits) {
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD instruction set on this machine";
  const Format& f = GetParam();
  for (int64_t K : odd_depths(f.format)) {
    if (K < 384) continue;
    const int64_t M = 111;
    const TestWeight tw = make_weight(f.format, M, K, uint64_t(K + 7));
    constexpr int64_t kRows = 41;  // past 32: the AMX kernels' many-row path too
    const std::vector<float> x = make_input(kRows, K, uint64_t(K + 11));
    for (CpuIsa isa : simd_isas()) {
      if (!has_kernel(isa, f.format)) continue;
      const GemmKernel k = kernel_for(isa, tw.view);
      if (isa == CpuIsa::Amx && (f.format == WeightFormat::FP8 || f.format == WeightFormat::FP4)) {
        ASSERT_EQ(k.isa, CpuIsa::Amx) << f.name << ": the tile kernel is not the one under test";
      }
      const std::vector<float> all = run_kernel(k, x, kRows, tw.view, f.quantize, true);
      const Product ref = reference(x, kRows, tw.view, f.quantize, true);
      for (int64_t i = 0; i < kRows * M; ++i)
        ASSERT_LE(std::fabs(all[size_t(i)] - ref.y[size_t(i)]), ref.bound[size_t(i)]) << f.name << " output " << i;
      for (int64_t r = 0; r < kRows; ++r) {  // each row alone
        const std::vector<float> xr(x.begin() + r * K, x.begin() + (r + 1) * K);
        const std::vector<float> one = run_kernel(k, xr, 1, tw.view, f.quantize, true);
        ASSERT_EQ(std::memcmp(one.data(), all.data() + r * M, size_t(M) * 4), 0)
            << f.name << " on " << isa_name(isa) << ": row " << r << " alone differs from " << kRows << " rows, K=" << K;
      }
      for (int64_t n = 2; n <= 8; ++n) {  // n-row prefixes
        const std::vector<float> part = run_kernel(k, x, n, tw.view, f.quantize, true);
        ASSERT_EQ(std::memcmp(part.data(), all.data(), size_t(n * M) * 4), 0) << f.name << " n=" << n;
      }
      for (int64_t split : {1, 3, 8, 13, 40}) {  // outputs split as threads would
        const std::vector<float> s = run_kernel(k, x, kRows, tw.view, f.quantize, true, split);
        ASSERT_EQ(std::memcmp(s.data(), all.data(), all.size() * 4), 0) << f.name << " split " << split;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemmKernelTest, ::testing::ValuesIn(kFormats),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ActivationQuantization, VectorizedEqualsReferenceBitForBit) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 7, K = 1024;
  std::vector<float> x(size_t(n * K));
  for (size_t i = 0; i < x.size(); ++i) {
    const int e = int(rng() % 60) - 40;  // from subnormal-after-scaling to large
    x[i] = (i % 97 == 0) ? 0.0f : (i % 89 == 0) ? -0.0f : normal(rng) * std::ldexp(1.0f, e);
  }
  for (int64_t b = 0; b < K / 128; ++b) x[size_t(3 * K + b * 128 + 5)] = 1e30f;  // saturating blocks
  std::vector<float> q1(x.size()), q2(x.size()), s1(size_t(n * K / 128)), s2(s1.size());
  quantize_activations_reference(x.data(), n, K, q1.data(), s1.data());
  quantize_activations(x.data(), n, K, K, q2.data(), s2.data());
  EXPECT_EQ(std::memcmp(q1.data(), q2.data(), q1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
}

// The softmax's vectorized exp against std::exp: within 2 ulp over the range it is used in.
TEST(SimdExp, WithinTwoUlpOfStdExp) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(-87.0f, 88.0f);
  int64_t worst = 0;
  for (int i = 0; i < 200000; ++i) {
    alignas(32) float x[8], y[8];
    for (float& v : x) v = i < 1000 ? -float(i) / 12.0f : u(rng);  // (above -87.3: no subnormal results)
    _mm256_store_ps(y, exp_x8(_mm256_load_ps(x)));
    for (int j = 0; j < 8; ++j) {
      const float ref = std::exp(x[j]);
      int32_t a, b;
      std::memcpy(&a, &y[j], 4);
      std::memcpy(&b, &ref, 4);
      worst = std::max<int64_t>(worst, std::abs(int64_t(a) - int64_t(b)));
    }
  }
  EXPECT_LE(worst, 2);
  alignas(32) float x[8] = {-1000.0f, -INFINITY, 1000.0f, INFINITY, NAN, 0.0f, -0.0f, 1.0f}, y[8];
  _mm256_store_ps(y, exp_x8(_mm256_load_ps(x)));
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], INFINITY);
  EXPECT_EQ(y[3], INFINITY);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_EQ(y[6], 1.0f);
  EXPECT_NEAR(y[7], std::exp(1.0f), 3e-7f);
}

// The vectorized Walsh–Hadamard + FP4 fake quantization equal the scalar loops bit for bit.
TEST(SimdHadamardFp4, EqualsScalarLoops) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t w : {32, 64, 128, 512}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<float> a(static_cast<size_t>(w));
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = (i % 13 == 0) ? 0.0f : round_bf16(normal(rng) * std::ldexp(1.0f, int(rng() % 20) - 10));
      if (rep == 0) a[3] = 1e30f;
      std::vector<float> b = a;
      const float scale = float(1.0 / std::sqrt(double(w)));
      for (int64_t h = 1; h < w; h *= 2)
        for (int64_t i = 0; i < w; i += 2 * h)
          for (int64_t j = i; j < i + h; ++j) {
            const float x = a[size_t(j)], y = a[size_t(j + h)];
            a[size_t(j)] = x + y;
            a[size_t(j + h)] = x - y;
          }
      for (auto& v : a) v = round_bf16(v * scale);
      std::vector<float> c = a;
      fake_quant_fp4(a.data(), w, kFp4Block);
      hadamard_row(b.data(), w, scale);
      ASSERT_EQ(std::memcmp(b.data(), c.data(), c.size() * 4), 0) << "hadamard, w " << w;
      fake_quant_fp4_row(b.data(), w);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "fp4 fake quant, w " << w << " rep " << rep;
    }
  }
}

TEST(GemmSelection, OddWidthsFallBackToTheReference) {
  const TestWeight tw2 = make_weight(WeightFormat::FP8, 5, 256, 1);
  EXPECT_EQ(select_gemm(CpuIsa::Reference, tw2.view).isa, CpuIsa::Reference);
  // The fallback checks below need a SIMD set; the Reference check above holds on any machine.
  if (simd_isas().empty()) GTEST_SKIP() << "no SIMD instruction set on this machine";
  const TestWeight tw = make_weight(WeightFormat::BF16, 5, 100, 1);
  for (CpuIsa isa : simd_isas()) EXPECT_EQ(select_gemm(isa, tw.view).isa, CpuIsa::Reference);
}

// The backend's linear: any thread count, any ISA path gives bits independent of the row count.
TEST(CpuLinear, ThreadCountDoesNotChangeBits) {
  const TestWeight tw = make_weight(WeightFormat::FP8, 300, 512, 3);
  const std::vector<float> x = make_input(5, 512, 4);
  std::vector<float> first;
  for (int threads : {1, 2, 3, 5}) {
    CpuBackend be(threads);
    // NaN-filled output: an output left unwritten stays NaN, which the finite check catches in the
    // first result and the bit comparison with it in the later ones.
    std::vector<float> xin(x), y(size_t(5 * 300), std::numeric_limits<float>::quiet_NaN());
    Tensor tx(xin.data(), DType::F32, {5, 512}), ty(y.data(), DType::F32, {5, 300});
    be.linear(tx, tw.view, ty, {});
    if (first.empty()) {
      first = y;
      ASSERT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return std::isfinite(v); }))
          << "the 1-thread linear left outputs unwritten or non-finite";
      ASSERT_TRUE(std::any_of(y.begin(), y.end(), [](float v) { return v != 0.0f; })) << "all-zero output";
    }
    ASSERT_EQ(std::memcmp(first.data(), y.data(), y.size() * 4), 0) << threads << " threads";
  }
}

}  // namespace
}  // namespace dsv4::cpu

namespace dsv4::cpu {
namespace {

// Prompt rows (Backend::set_prompt_rows): with AMX, the CPU backend multiplies them on the tile
// unit and the other rows with the vector kernels. A row's bits depend on its kind alone: rows of
// a mixed pass equal the same rows in a pass of their own kind, and the tile kernel really ran
// (its unrounded sums differ somewhere).
TEST(PromptRows, EachKindOfRowKeepsItsOwnKernelWhateverTheMix) {
  if (!cpu_features().has(CpuIsa::Amx)) GTEST_SKIP() << "no AMX on this machine";
  CpuBackend be(2, CpuIsa::Amx);
  const int64_t n = 21, K = 512, M = 300;
  for (WeightFormat format : {WeightFormat::FP8, WeightFormat::FP4}) {
    const TestWeight tw = make_weight(format, M, K, 77);
    std::vector<float> x = make_input(n, K, 78);
    Tensor tx(x.data(), DType::F32, {n, K});
    auto run = [&](int64_t prompt_rows, bool grouped) {
      std::vector<float> y(size_t(n * M));
      Tensor ty(y.data(), DType::F32, {n, M});
      be.set_prompt_rows(prompt_rows);
      if (grouped) {  // two groups of K/2 inputs, M/2 outputs each
        TestWeight half = make_weight(format, M, K / 2, 79);
        be.grouped_linear(tx, half.view, 2, ty, {ActQuant::None, false});
      } else {
        be.linear(tx, tw.view, ty, {ActQuant::ByWeight, false});
      }
      be.set_prompt_rows(0);
      return y;
    };
    for (bool grouped : {false, true}) {
      SCOPED_TRACE(std::string(weight_format_name(format)) + (grouped ? " grouped" : " linear"));
      const std::vector<float> prompt = run(n, grouped), other = run(0, grouped), mixed = run(8, grouped);
      EXPECT_EQ(std::memcmp(mixed.data(), prompt.data(), size_t(8 * M) * 4), 0) << "prompt rows of a mixed pass";
      EXPECT_EQ(std::memcmp(mixed.data() + 8 * M, other.data() + 8 * M, size_t((n - 8) * M) * 4), 0)
          << "other rows of a mixed pass";
      EXPECT_NE(std::memcmp(prompt.data(), other.data(), prompt.size() * 4), 0) << "the tile kernel did not run";
    }
  }
}

}  // namespace
}  // namespace dsv4::cpu
