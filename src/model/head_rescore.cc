#include "model/head_rescore.h"

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace dsv4 {

void top_k_indices(const float* v, int64_t n, int64_t k, std::vector<int64_t>& out,
                   std::vector<std::pair<float, int64_t>>& heap) {
  // A min-heap of the k best so far: most entries fail the one comparison with its smallest.
  out.clear();
  heap.clear();
  if (k <= 0) return;
  int64_t i = 0;
  for (; i < n && int64_t(heap.size()) < k; ++i)
    if (v[i] == v[i]) heap.emplace_back(v[i], i);
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  for (; i < n; ++i) {
    if (!(v[i] > heap.front().first)) continue;
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.back() = {v[i], i};
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }
  for (const auto& [value, index] : heap) out.push_back(index);
}

void rescore_top_logits(Pass& p, const Tensor& y, const HeadRescore& rescore, int64_t vocab,
                        std::vector<float>& logits) {
  const WeightView& w = *rescore.exact;
  DSV4_CHECK(w.format == WeightFormat::BF16 || w.format == WeightFormat::F32, "head rescore: the exact head '",
             w.name(), "' is ", weight_format_name(w.format), " (BF16 or F32 rows expected)");
  DSV4_CHECK(vocab <= w.rows && w.cols == y.dim(1), "head rescore: ", vocab, " logits per row against '", w.name(),
             "' [", w.rows, ", ", w.cols, "]");
  const int64_t m = y.dim(0), top = std::min(rescore.top, vocab);
  HeadRescoreScratch own;
  HeadRescoreScratch& s = rescore.scratch ? *rescore.scratch : own;
  std::vector<int64_t>& picked = s.picked;
  std::vector<int64_t>& row_top = s.row_top;
  picked.resize(size_t(m * top));
  Tensor exact = p.alloc({m * top, 1});
  for (int64_t i = 0; i < m; ++i) {
    top_k_indices(logits.data() + i * vocab, vocab, top, row_top, s.heap);
    row_top.resize(size_t(top), row_top.empty() ? 0 : row_top[0]);  // (fewer only when the row has NaNs)
    std::copy(row_top.begin(), row_top.end(), picked.begin() + i * top);
    // The exact head's rows, in one call: the same kernel, the same sums as its full pass.
    Tensor out = exact.slice(i * top, (i + 1) * top);
    p.be.linear_rows(y.slice(i, i + 1), w, row_top, out);
  }
  std::vector<float>& values = s.values;
  values.resize(size_t(m * top));
  p.be.to_host(exact, values.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < top; ++j)
      logits[size_t(i * vocab + picked[size_t(i * top + j)])] = values[size_t(i * top + j)];
}

}  // namespace dsv4
