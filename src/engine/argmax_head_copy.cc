#include "engine/argmax_head_copy.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "checkpoint/weight_quantizer.h"
#include "core/error.h"
#include "core/number_formats.h"
#include "core/thread_pool.h"
#include "engine/draft_head.h"

namespace dsv4 {
namespace {

// (q − 8) · s of packed INT4 codes, column i of a row (low nibble: the even column).
float int4_value(const uint8_t* codes, int64_t i, float s) {
  const int q = i % 2 ? codes[i / 2] >> 4 : codes[i / 2] & 15;
  return float(q - 8) * s;
}

WeightView int4_view(int64_t rows, int64_t cols, uint8_t* codes, uint8_t* scales, const char* label) {
  WeightView v;
  v.format = WeightFormat::INT4;
  v.rows = rows;
  v.cols = cols;
  v.scale_cols = cols / kInt4Group;
  v.data = codes;
  v.scale = scales;
  v.label = label;
  return v;
}

}  // namespace

bool ArgmaxHeadCopy::possible(const WeightView& head) {
  return head.present() && (head.format == WeightFormat::BF16 || head.format == WeightFormat::F32) &&
         head.cols % kInt4Group == 0;
}

ArgmaxHeadCopy::ArgmaxHeadCopy(const WeightView& head, int threads) {
  DSV4_CHECK(possible(head), "bounded head: a copy is made from a BF16 or F32 head with columns in groups of ",
             kInt4Group, "; '", head.name(), "' is ", head.present() ? weight_format_name(head.format) : "unbound",
             " [", head.rows, ", ", head.cols, "]");
  const int64_t rows = head.rows, cols = head.cols, groups = cols / kInt4Group;
  hi_codes_.resize(size_t(rows * cols / 2));
  lo_codes_.resize(size_t(rows * cols / 2));
  hi_scales_.resize(size_t(rows * groups * 2));
  lo_scales_.resize(size_t(rows * groups * 2));
  slack_.resize(size_t(rows));
  // Either fp32 sum (the head's kernel, or a plane's) is within γ·Σ|x_i w_i| of the exact one;
  // γ = 2·(cols + 64)·2⁻²⁴ is twice the worst case of summing cols products one by one.
  const double gamma = 2.0 * double(cols + 64) * std::ldexp(1.0, -24);
  ThreadPool pool(threads);
  std::vector<std::vector<float>> buffers(size_t(pool.size()));
  constexpr int64_t kRowsPerTask = 64;
  pool.run((rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t t, int worker) {
    const int64_t r0 = t * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
    std::vector<float>& x = buffers[size_t(worker)];
    x.resize(size_t(kRowsPerTask * cols));
    head_rows_to_f32(head, r0, r1, x.data());
    uint8_t* hc = hi_codes_.data() + r0 * cols / 2;
    uint8_t* hs = hi_scales_.data() + r0 * groups * 2;
    uint8_t* lc = lo_codes_.data() + r0 * cols / 2;
    uint8_t* ls = lo_scales_.data() + r0 * groups * 2;
    quantize_int4_rows(x.data(), r1 - r0, cols, hc, hs);
    for (int64_t r = 0; r < r1 - r0; ++r) {
      double err = 0.0, w2 = 0.0, h2 = 0.0, l2 = 0.0;
      for (int64_t g = 0; g < groups; ++g) {
        uint16_t h;
        std::memcpy(&h, hs + (r * groups + g) * 2, 2);
        const float s_hi = bf16_to_f32(h);
        const uint16_t l = f32_to_bf16(s_hi / 16.0f);  // exact: a power of two off a bf16
        std::memcpy(ls + (r * groups + g) * 2, &l, 2);
        const float s_lo = bf16_to_f32(l);
        for (int64_t i = g * kInt4Group; i < (g + 1) * kInt4Group; i += 2) {
          int q[2];
          for (int j = 0; j < 2; ++j) {
            const float w = x[size_t(r * cols + i + j)], vh = int4_value(hc + r * cols / 2, i + j, s_hi);
            q[j] = int(std::clamp(std::nearbyint((w - vh) / s_lo), -8.0f, 7.0f)) + 8;
            const double vl = double(q[j] - 8) * s_lo, e = double(w) - double(vh) - vl;
            err += e * e, w2 += double(w) * w, h2 += double(vh) * vh, l2 += vl * vl;
          }
          lc[(r * cols + i) / 2] = uint8_t(q[0] | (q[1] << 4));
        }
      }
      // Rounded up: the bound must hold, a little slack costs nothing.
      const double c = std::sqrt(err) * (1.0 + 1e-6) + gamma * (std::sqrt(w2) + std::sqrt(h2) + std::sqrt(l2));
      slack_[size_t(r0 + r)] = std::nextafter(float(c), INFINITY);
    }
  });
  hi_ = int4_view(rows, cols, hi_codes_.data(), hi_scales_.data(), "bounded head (int4 plane hi)");
  lo_ = int4_view(rows, cols, lo_codes_.data(), lo_scales_.data(), "bounded head (int4 plane lo)");
}

void ArgmaxHeadCopy::release_if_moved() {
  if (hi_.data != hi_codes_.data()) {
    std::vector<uint8_t>().swap(hi_codes_);
    std::vector<uint8_t>().swap(hi_scales_);
  }
  if (lo_.data != lo_codes_.data()) {
    std::vector<uint8_t>().swap(lo_codes_);
    std::vector<uint8_t>().swap(lo_scales_);
  }
}

}  // namespace dsv4
