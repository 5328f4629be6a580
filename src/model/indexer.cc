#include "model/indexer.h"

#include <cmath>

namespace dsv4 {

Indexer::Indexer(const IndexerWeights& w, const ModelConfig& c, const RopeSpec& rope)
    : w_(w), heads_(c.index_n_heads), head_dim_(c.index_head_dim), top_k_(c.index_topk),
      ratio_(w.compressor.ratio), rope_(rope), compressor_(w.compressor, c, rope, Compressor::Kind::Indexer) {}

Tensor Indexer::query(Pass& p, const Tensor& qr) const {
  const int64_t n = qr.rows();
  Tensor q = p.alloc({n, heads_ * head_dim_});
  p.be.linear(qr, w_.wq_b, q);
  q = q.reshape({n, heads_, head_dim_});
  p.be.rope(q, p.positions, rope_, false);
  p.be.hadamard_fp4(q);
  return q;
}

Tensor Indexer::head_weights(Pass& p, const Tensor& x) const {
  Tensor w = p.alloc({x.rows(), heads_});
  p.be.linear(x, w_.weights_proj, w);
  p.be.scale(w, float(1.0 / std::sqrt(double(head_dim_)) / std::sqrt(double(heads_))), w);
  return w;
}

Tensor Indexer::top_k(Pass& p, const Tensor& q, const Tensor& weights, size_t layer, const std::string& scope) const {
  const int64_t n = q.dim(0);
  std::vector<IndexerRow> rows(static_cast<size_t>(n));
  int64_t max_entries = 0;
  for (int64_t r = 0; r < n; ++r) {
    // Entries complete at this position (including one completed by this very token).
    const int64_t visible = (p.positions[size_t(r)] + 1) / ratio_;
    rows[size_t(r)] = {&compressor_.entry_table(p.cache(r, layer)), visible};
    max_entries = std::max(max_entries, visible);
  }
  Tensor selected = p.alloc_i32({n, top_k_});
  if (!p.tracing()) {
    p.be.indexer_select(q, weights, rows, top_k_, selected, nullptr);
    return selected;
  }
  Tensor scores = p.alloc({n, std::max<int64_t>(max_entries, 1)});
  p.be.indexer_select(q, weights, rows, top_k_, selected, &scores);
  p.trace(scope, "indexer.scores", scores);
  p.trace(scope, "indexer.topk", selected);
  return selected;
}

Tensor Indexer::select(Pass& p, const Tensor& x, const Tensor& qr, size_t layer, const std::string& scope) const {
  Tensor q = query(p, qr);
  p.trace(scope, "indexer.q", q);
  Tensor w = head_weights(p, x);
  p.trace(scope, "indexer.weights", w);
  return top_k(p, q, w, layer, scope);
}

}  // namespace dsv4
