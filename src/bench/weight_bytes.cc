#include "bench/weight_bytes.h"

#include <algorithm>

namespace dsv4::bench {

int64_t view_bytes(const WeightView& w) {
  if (!w.present()) return 0;
  switch (w.format) {
    case WeightFormat::FP8: return w.rows * w.cols + (w.rows + 127) / 128 * w.scale_cols;
    case WeightFormat::FP4: return w.rows * (w.cols / 2) + w.rows * w.scale_cols;
    case WeightFormat::BF16: return w.rows * w.cols * 2;
    case WeightFormat::I64: return w.rows * w.cols * 8;
    default: return w.rows * w.cols * 4;
  }
}

namespace {

int64_t hc_bytes(const HcWeights& h) { return view_bytes(h.fn) + view_bytes(h.base) + view_bytes(h.scale); }

int64_t compressor_bytes(const CompressorWeights& c) {
  return view_bytes(c.ape) + view_bytes(c.wkv) + view_bytes(c.wgate) + view_bytes(c.norm);
}

}  // namespace

int64_t block_dense_bytes(const BlockWeights& b) {
  const AttentionWeights& a = b.attn;
  int64_t n = hc_bytes(b.hc_attn) + hc_bytes(b.hc_ffn) + view_bytes(b.attn_norm) + view_bytes(b.ffn_norm);
  n += view_bytes(a.attn_sink) + view_bytes(a.wq_a) + view_bytes(a.q_norm) + view_bytes(a.wq_b) + view_bytes(a.wkv) +
       view_bytes(a.kv_norm) + view_bytes(a.wo_a) + view_bytes(a.wo_b);
  if (a.compressor) n += compressor_bytes(*a.compressor);
  if (a.indexer) n += view_bytes(a.indexer->wq_b) + view_bytes(a.indexer->weights_proj) +
                      compressor_bytes(a.indexer->compressor);
  const MoeWeights& m = b.ffn;
  n += view_bytes(m.gate) + view_bytes(m.bias) + view_bytes(m.shared.w1) + view_bytes(m.shared.w2) +
       view_bytes(m.shared.w3);
  if (m.tid2eid.present()) n += m.tid2eid.cols * 8;
  return n;
}

int64_t experts_bytes(const MoeWeights& m, const std::set<int64_t>& selected) {
  int64_t n = 0;
  for (int64_t e : selected) {
    const ExpertWeights& x = m.experts[size_t(e)];
    n += view_bytes(x.w1) + view_bytes(x.w2) + view_bytes(x.w3);
  }
  return n;
}

int64_t cache_read_bytes(const LayerCacheGeometry& g, int64_t position, int64_t index_topk) {
  int64_t rows = std::min<int64_t>(position + 1, g.window);
  int64_t n = 0;
  if (g.ratio > 0) {
    const int64_t visible = (position + 1) / g.ratio;
    rows += g.index_head_dim > 0 ? std::min(visible, index_topk) : visible;
    if (g.index_head_dim > 0) n += visible * g.index_head_dim * 2;
  }
  return n + rows * g.head_dim * 2;
}

}  // namespace dsv4::bench
