// Helpers of the op-comparison tests (tests/backend/*_test.cc): the backends under test, random
// inputs and weights built in memory, and comparisons of results — bit for bit, or within a
// per-element bound the test derives from its data.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#include "core/number_formats.h"
#include "support/cpu_isas.h"

namespace dsv4::test {

constexpr double kU = 0x1p-24;  // unit roundoff of f32

// ---- the backends

struct CpuSubject {
  std::string name;   // "cpu/avx2", "cpu/amx+prompt", ...
  CpuBackend* be;
  bool prompt_rows;   // ops run with set_prompt_rows (AMX: those rows' products on the tile unit)
};

// The CPU backend (2 threads) on the scalar kernels and on every SIMD instruction set of this
// machine; with AMX once more with prompt rows declared. Made once per process.
inline const std::vector<CpuSubject>& cpu_subjects() {
  static const std::vector<CpuSubject> subjects = [] {
    static std::vector<std::unique_ptr<CpuBackend>> owned;
    std::vector<CpuSubject> s;
    std::vector<CpuIsa> isas = {CpuIsa::Reference};
    for (CpuIsa isa : simd_isas()) isas.push_back(isa);
    for (CpuIsa isa : isas) {
      owned.push_back(std::make_unique<CpuBackend>(2, isa));
      s.push_back({std::string("cpu/") + isa_name(isa), owned.back().get(), false});
      if (isa == CpuIsa::Amx) s.push_back({"cpu/amx+prompt", owned.back().get(), true});
    }
    return s;
  }();
  return subjects;
}

inline ReferenceBackend& reference() {
  static ReferenceBackend be;
  return be;
}

// Runs f(backend) on every CPU subject, its name in the failure messages; a call over `rows`
// rows declares the first half (rounded up) of them prompt rows on the prompt subject, so that
// one call mixes both kinds of rows.
template <class F>
void for_each_cpu(int64_t rows, F&& f) {
  for (const CpuSubject& s : cpu_subjects()) {
    SCOPED_TRACE(s.name);
    s.be->set_prompt_rows(s.prompt_rows ? rows - rows / 2 : 0);
    f(static_cast<Backend&>(*s.be));
    s.be->set_prompt_rows(0);
  }
}

// ---- tensors over host vectors (both backends keep tensors in host memory)

inline Tensor tensor(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  Tensor t(v.data(), DType::F32, dims);
  EXPECT_EQ(size_t(t.numel()), v.size()) << "test tensor " << t.shape_string();
  return t;
}
inline Tensor tensor(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  Tensor t(v.data(), DType::I32, dims);
  EXPECT_EQ(size_t(t.numel()), v.size()) << "test tensor " << t.shape_string();
  return t;
}

// ---- random data

// bf16 values (as the model's activations) with a spread of magnitudes 2^-3 .. 2^4 and some zeros.
inline std::vector<float> activations(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    const uint64_t r = rng() % 16;
    v = r == 0 ? 0.0f : round_bf16(normal(rng) * std::ldexp(1.0f, int(r % 8) - 3));
  }
  return x;
}

// bf16 values ~ N(0, sigma²).
inline std::vector<float> normal_bf16(int64_t n, uint64_t seed, float sigma = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = round_bf16(normal(rng));
  return x;
}

// Values ±(1 + m/8)·2^e, e ∈ {0, 1}, and some zeros: e4m3 values that quantize to themselves and
// whose products with "narrow" weights (below) sum exactly in f32 in any order.
inline std::vector<float> narrow_activations(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    const uint64_t r = rng();
    const float sign = (r >> 8) & 1 ? -1.0f : 1.0f;
    v = r % 11 == 0 ? 0.0f : sign * (1.0f + float((r >> 9) % 8) / 8.0f) * float(1 + (r >> 12) % 2);
  }
  return x;
}

// ---- weights built in memory

struct TestWeight {
  std::vector<uint8_t> data, scale;
  WeightView view;
  TestWeight() = default;
  TestWeight(TestWeight&&) = default;  // the vectors' buffers move with them: the view stays valid
  TestWeight& operator=(TestWeight&&) = default;
  TestWeight(const TestWeight&) = delete;
};

enum class Spread {
  Wide,    // FP8: every non-NaN code, scales 2^-9 .. 2^2; FP4: every code, scales 2^-7 .. 2^2; else N(0, 0.05²)
  Narrow,  // FP8: codes in [0.5, 4), FP4: nonzero codes; scales 2^-1, 2^0 (exact sums, see narrow_activations);
           // BF16: the narrow FP4 values
};

inline TestWeight make_weight(WeightFormat f, int64_t rows, int64_t cols, uint64_t seed, Spread spread = Spread::Wide) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  TestWeight t;
  WeightView& w = t.view;
  w.format = f;
  w.rows = rows;
  w.cols = cols;
  const bool narrow = spread == Spread::Narrow;
  auto scale_code = [&](int lo, int count) { return uint8_t(narrow ? 126 + rng() % 2 : lo + rng() % uint64_t(count)); };
  switch (f) {
    case WeightFormat::FP8:
      t.data.resize(size_t(rows * cols));
      for (auto& b : t.data) {
        if (narrow) b = uint8_t((rng() & 0x80) | (6 + rng() % 3) << 3 | (rng() & 7));  // exponent field 6..8
        else do b = uint8_t(rng()); while ((b & 0x7F) == 0x7F);                          // no NaN codes
      }
      w.scale_cols = (cols + kFp8Block - 1) / kFp8Block;
      t.scale.resize(size_t((rows + kFp8Block - 1) / kFp8Block * w.scale_cols));
      for (auto& s : t.scale) s = scale_code(118, 12);
      break;
    case WeightFormat::FP4:
      t.data.resize(size_t(rows * cols / 2));
      for (auto& b : t.data) {
        b = uint8_t(rng());
        if (narrow) b |= 0x11;  // codes 1, 3, 5, 7 (and negatives): nonzero
      }
      w.scale_cols = cols / kFp4Block;
      t.scale.resize(size_t(rows * w.scale_cols));
      for (auto& s : t.scale) s = scale_code(120, 10);
      break;
    case WeightFormat::FP8F: {  // the FP8 codes; F32 tile scales 2^e·{1, 1.25, 1.5} (products stay exact)
      t.data.resize(size_t(rows * cols));
      for (auto& b : t.data) {
        if (narrow) b = uint8_t((rng() & 0x80) | (6 + rng() % 3) << 3 | (rng() & 7));
        else do b = uint8_t(rng()); while ((b & 0x7F) == 0x7F);
      }
      w.scale_cols = (cols + kFp8Block - 1) / kFp8Block;
      const int64_t n = (rows + kFp8Block - 1) / kFp8Block * w.scale_cols;
      t.scale.resize(size_t(n * 4));
      static constexpr float kMantissa[3] = {1.0f, 1.25f, 1.5f};
      for (int64_t i = 0; i < n; ++i) {
        const float s = narrow ? (rng() % 2 ? 0.5f : 1.0f) : std::ldexp(kMantissa[rng() % 3], int(rng() % 12) - 9);
        std::memcpy(t.scale.data() + i * 4, &s, 4);
      }
      break;
    }
    case WeightFormat::INT4: {  // any 4-bit q (narrow: q - 8 odd, nonzero); BF16 group scales
      t.data.resize(size_t(rows * cols / 2));
      for (auto& b : t.data) {
        b = uint8_t(rng());
        if (narrow) b |= 0x11;  // q odd: q - 8 in {-7, -5, ..., 7}
      }
      w.scale_cols = cols / kInt4Group;
      t.scale.resize(size_t(rows * w.scale_cols * 2));
      for (int64_t i = 0; i < rows * w.scale_cols; ++i) {
        const float s = narrow ? (rng() % 2 ? 0.25f : 0.125f) : round_bf16(0.001f + float(rng() % 1000) * 1e-5f);
        const uint16_t h = f32_to_bf16(s);
        std::memcpy(t.scale.data() + i * 2, &h, 2);
      }
      break;
    }
    case WeightFormat::INT2: {  // any 2-bit q; BF16 group scales
      t.data.resize(size_t(rows * cols / 4));
      for (auto& b : t.data) b = uint8_t(rng());
      w.scale_cols = cols / kInt2Group;
      t.scale.resize(size_t(rows * w.scale_cols * 2));
      for (int64_t i = 0; i < rows * w.scale_cols; ++i) {
        const uint16_t h = f32_to_bf16(narrow ? (rng() % 2 ? 0.25f : 0.125f) : round_bf16(0.001f + float(rng() % 1000) * 1e-5f));
        std::memcpy(t.scale.data() + i * 2, &h, 2);
      }
      break;
    }
    case WeightFormat::NVFP4:  // the FP4 codes; E4M3 block scales (wide: 2^-6 .. 2^3 with mantissas) and a global scale
      t.data.resize(size_t(rows * cols / 2));
      for (auto& b : t.data) {
        b = uint8_t(rng());
        if (narrow) b |= 0x11;
      }
      w.scale_cols = cols / kNvfp4Block;
      t.scale.resize(size_t(rows * w.scale_cols));
      for (auto& s : t.scale) s = narrow ? uint8_t(0x30 + (rng() % 2) * 0x08) : uint8_t(0x08 + rng() % 0x50);  // 0.5, 1
      w.global_scale = narrow ? 0.5f : 0.3f;
      break;
    case WeightFormat::BF16: {
      t.data.resize(size_t(rows * cols * 2));
      auto* h = reinterpret_cast<uint16_t*>(t.data.data());
      // Narrow: the values of narrow FP4 weights (codes ±0.5, 1.5, 3, 6 times 2^-1 or 2^0), stored as BF16.
      static constexpr float kNarrow[4] = {0.5f, 1.5f, 3.0f, 6.0f};
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint64_t r = rng();
        h[i] = f32_to_bf16(narrow ? (r & 1 ? -1.0f : 1.0f) * kNarrow[(r >> 1) % 4] * ((r >> 3) & 1 ? 0.5f : 1.0f)
                                  : normal(rng));
      }
      break;
    }
    default: {
      t.data.resize(size_t(rows * cols * 4));
      auto* v = reinterpret_cast<float*>(t.data.data());
      for (int64_t i = 0; i < rows * cols; ++i) v[i] = normal(rng);
      break;
    }
  }
  w.data = t.data.data();
  w.scale = t.scale.empty() ? nullptr : t.scale.data();
  return t;
}

// A weight holding the given values, as F32 or BF16 (rounded), [rows, values/rows].
inline TestWeight weight_of(const std::vector<float>& values, WeightFormat f, int64_t rows = 1) {
  TestWeight t;
  t.view.format = f;
  t.view.rows = rows;
  t.view.cols = int64_t(values.size()) / rows;
  if (f == WeightFormat::BF16) {
    t.data.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = f32_to_bf16(values[i]);
      std::memcpy(t.data.data() + 2 * i, &h, 2);
    }
  } else {
    t.data.resize(values.size() * 4);
    std::memcpy(t.data.data(), values.data(), values.size() * 4);
  }
  t.view.data = t.data.data();
  return t;
}

// The value of w at [m, k] (codes times their scales).
inline float weight_value(const WeightView& w, int64_t m, int64_t k) {
  switch (w.format) {
    case WeightFormat::FP8:
      return e4m3_to_f32(w.data[m * w.cols + k]) * e8m0_to_f32(w.scale[(m / 128) * w.scale_cols + k / 128]);
    case WeightFormat::FP4:
      return fp4_packed_at(w.data + m * (w.cols / 2), k) * e8m0_to_f32(w.scale[m * w.scale_cols + k / 32]);
    case WeightFormat::FP8F: {
      float s;
      std::memcpy(&s, w.scale + ((m / 128) * w.scale_cols + k / 128) * 4, 4);
      return e4m3_to_f32(w.data[m * w.cols + k]) * s;
    }
    case WeightFormat::INT4: {
      uint16_t h;
      std::memcpy(&h, w.scale + (m * w.scale_cols + k / kInt4Group) * 2, 2);
      return int4_packed_at(w.data + m * (w.cols / 2), k) * bf16_to_f32(h);
    }
    case WeightFormat::INT2: {
      uint16_t h;
      std::memcpy(&h, w.scale + (m * w.scale_cols + k / kInt2Group) * 2, 2);
      return int2_packed_at(w.data + m * (w.cols / 4), k) * bf16_to_f32(h);
    }
    case WeightFormat::NVFP4:  // the scale product rounds as the backends round it
      return fp4_packed_at(w.data + m * (w.cols / 2), k) *
             (e4m3_to_f32(w.scale[m * w.scale_cols + k / kNvfp4Block]) * w.global_scale);
    case WeightFormat::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(w.data)[m * w.cols + k]);
    default: return reinterpret_cast<const float*>(w.data)[m * w.cols + k];
  }
}

// ---- tolerances

// How far apart two results may be after rounding to bf16 when each was, unrounded, within `err`
// of `exact`: 0 when no bf16 rounding boundary lies in exact ± err (rounding is monotone, so both
// round to the same value), else the distance between the roundings of the interval's ends.
inline double bf16_spread(double exact, double err) {
  const float lo = std::nextafter(float(exact - err), -INFINITY), hi = std::nextafter(float(exact + err), INFINITY);
  return double(round_bf16(hi)) - double(round_bf16(lo));
}

// |Δ| allowed per output of a product y[r·ldy + m] = Σ_k x[r·ldx + k]·w[m, k] (m in [m0, m1)) between
// two backends. Both sum the same exact products (activations quantized the same way, codes times
// power-of-two scales) in different orders, so each unrounded sum lies within K·u·Σ|x̂·ŵ| of the exact
// one (computed here in double): an f32 output within twice that of the other backend's, a bf16
// output equal to it unless that interval holds a rounding boundary (bf16_spread).
inline void product_bound(const float* x, int64_t n, int64_t ldx, const WeightView& w, int64_t m0, int64_t m1,
                          bool quantize, bool round, int64_t ldy, std::vector<double>& bound) {
  const int64_t K = w.cols;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<float> xq(x + r * ldx, x + r * ldx + K);
    if (quantize) fake_quant_fp8(xq.data(), K, kFp8Block);  // x̂ = e4m3(x/s)·s, as the products see it
    for (int64_t m = m0; m < m1; ++m) {
      double exact = 0, mass = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(xq[size_t(k)]) * weight_value(w, m, k);
        exact += p;
        mass += std::fabs(p);
      }
      const double err = (double(K) + 1) * kU * mass * 1.01;  // (+1 and 1%: the double sum's own error)
      bound[size_t(r * ldy + m)] = round ? bf16_spread(exact, err) : 2 * err;
    }
  }
}

// ---- comparisons

// Bit for bit (NaN payloads included).
template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& want, const std::vector<T>& got) {
  if (want.size() != got.size())
    return ::testing::AssertionFailure() << "sizes differ: " << want.size() << " vs " << got.size();
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&want[i], &got[i], sizeof(T)) != 0 && differ++ == 0) first = int64_t(i);
  if (differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differ << " of " << want.size() << " values differ in their bits; first at "
                                       << first << ": reference " << want[size_t(first)] << ", cpu "
                                       << got[size_t(first)];
}

// |got − want| ≤ bound per element (a NaN anywhere fails).
inline ::testing::AssertionResult within(const std::vector<float>& want, const std::vector<float>& got,
                                         const std::vector<double>& bound) {
  if (want.size() != got.size() || bound.size() != want.size())
    return ::testing::AssertionFailure() << "sizes differ: " << want.size() << ", " << got.size() << ", "
                                         << bound.size();
  int64_t bad = 0, first = -1;
  double worst = 0;  // the largest |Δ|/bound
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    if (!(d <= bound[i]) && bad++ == 0) first = int64_t(i);
    if (bound[i] > 0) worst = std::max(worst, d / bound[i]);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << want.size() << " values outside the bound; first at " << first << ": reference "
     << want[size_t(first)] << ", cpu " << got[size_t(first)]
     << ", |Δ| " << std::fabs(got[size_t(first)] - want[size_t(first)]) << " > " << bound[size_t(first)]
     << " (worst |Δ|/bound " << worst << ")";
  return ::testing::AssertionFailure() << os.str();
}

// Whether `op` throws dsv4::Error on the backend (and nothing else).
template <class F>
bool throws_error(F&& op) {
  try {
    op();
  } catch (const Error&) {
    return true;
  }
  return false;
}

}  // namespace dsv4::test
