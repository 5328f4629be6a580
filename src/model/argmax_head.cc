#include "model/argmax_head.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace dsv4 {

bool bounded_argmax_logits(Pass& p, const Tensor& y, const ArgmaxHead& head, const WeightView& exact,
                           int64_t vocab, int64_t max_candidates, std::vector<float>& logits,
                           ArgmaxHeadScratch& s, ArgmaxHeadCounts& counts) {
  const int64_t m = y.dim(0), D = y.dim(1);
  DSV4_CHECK(head.hi.rows >= vocab && head.lo.rows >= vocab && int64_t(head.slack.size()) >= vocab &&
                 head.hi.cols == D && head.lo.cols == D && exact.rows >= vocab && exact.cols == D,
             "bounded head: copy [", head.hi.rows, ", ", head.hi.cols, "] with ", head.slack.size(),
             " slacks against the head '", exact.name(), "' [", exact.rows, ", ", exact.cols, "] and ", vocab,
             " logits of width ", D);
  // The estimate A = x·hi + x·lo for every row of the copy.
  Tensor est = p.alloc({m, head.hi.rows}), low = p.alloc({m, head.lo.rows});
  p.be.linear(y, head.hi, est, {ActQuant::None, /*round_bf16=*/false});
  p.be.linear(y, head.lo, low, {ActQuant::None, /*round_bf16=*/false});
  s.estimate.resize(size_t(est.numel()));
  s.lo.resize(size_t(low.numel()));
  s.y.resize(size_t(m * D));
  p.be.to_host(est, s.estimate.data());
  p.be.to_host(low, s.lo.data());
  p.be.to_host(y, s.y.data());

  // Per row: ‖x‖ (rounded up a little: double sums of ≤ 4096 squares), the threshold
  // max_r(A_r − ‖x‖c_r), and the rows whose A_r + ‖x‖c_r reach it.
  constexpr double kUp = 1.0 + 1e-9;
  std::vector<int64_t>& picked = s.picked;
  picked.clear();
  std::vector<int64_t>& begin = s.begin;
  begin.assign(size_t(m + 1), 0);
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0.0;
    for (int64_t k = 0; k < D; ++k) ss += double(s.y[size_t(i * D + k)]) * s.y[size_t(i * D + k)];
    const double nx = std::sqrt(ss) * kUp;
    const float* a_hi = s.estimate.data() + i * head.hi.rows;
    const float* a_lo = s.lo.data() + i * head.lo.rows;
    if (!std::isfinite(nx)) return ++counts.fallbacks, false;
    double threshold = -std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < vocab; ++r) {
      const double a = double(a_hi[r]) + double(a_lo[r]), b = nx * double(head.slack[size_t(r)]) * kUp;
      if (!std::isfinite(a)) return ++counts.fallbacks, false;
      threshold = std::max(threshold, a - b);
    }
    for (int64_t r = 0; r < vocab; ++r) {
      const double a = double(a_hi[r]) + double(a_lo[r]), b = nx * double(head.slack[size_t(r)]) * kUp;
      if (a + b >= threshold) {
        if (int64_t(picked.size()) - begin[size_t(i)] >= max_candidates) return ++counts.fallbacks, false;
        picked.push_back(r);
      }
    }
    begin[size_t(i + 1)] = int64_t(picked.size());
  }

  // The candidates' exact logits, with the head's own kernel (the sums of a full pass).
  s.exact.resize(picked.size());
  for (int64_t i = 0; i < m; ++i) {
    const std::span<const int64_t> rows(picked.data() + begin[size_t(i)], size_t(begin[size_t(i + 1)] - begin[size_t(i)]));
    Tensor out = p.alloc({int64_t(rows.size()), 1});
    p.be.linear_rows(y.slice(i, i + 1), exact, rows, out);
    p.be.to_host(out, s.exact.data() + begin[size_t(i)]);
  }
  for (float v : s.exact)
    if (!std::isfinite(v)) return ++counts.fallbacks, false;
  logits.assign(size_t(m * vocab), -std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = begin[size_t(i)]; j < begin[size_t(i + 1)]; ++j)
      logits[size_t(i * vocab + picked[size_t(j)])] = s.exact[size_t(j)];
  counts.rows += m;
  counts.candidates += int64_t(picked.size());
  return true;
}

}  // namespace dsv4
