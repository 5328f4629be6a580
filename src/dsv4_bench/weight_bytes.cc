#include "dsv4_bench/weight_bytes.h"

#include <algorithm>

namespace dsv4::bench {

int64_t view_bytes(const WeightView& w) {
  if (!w.present()) return 0;
  switch (w.format) {
    case WeightFormat::FP8: return w.rows * w.cols + (w.rows + 127) / 128 * w.scale_cols;
    case WeightFormat::FP8F: return w.rows * w.cols + (w.rows + 127) / 128 * w.scale_cols * 4;
    case WeightFormat::INT4: return w.rows * (w.cols / 2) + w.rows * w.scale_cols * 2;
    case WeightFormat::INT4G: return w.rows * (w.cols / 2) + w.rows * w.scale_cols * 4;
    case WeightFormat::INT2: return w.rows * (w.cols / 4) + w.rows * w.scale_cols * 2;
    case WeightFormat::FP4:
    case WeightFormat::NVFP4: return w.rows * (w.cols / 2) + w.rows * w.scale_cols;
    case WeightFormat::BF16: return w.rows * w.cols * 2;
    case WeightFormat::I64: return w.rows * w.cols * 8;
    default: return w.rows * w.cols * 4;
  }
}

namespace {

void add(FormatBytes& f, const WeightView& w) {
  if (w.present()) f[w.format] += view_bytes(w);
}

void add_compressor(FormatBytes& f, const CompressorWeights& c) {
  for (const WeightView* w : {&c.ape, &c.wkv, &c.wgate, &c.norm}) add(f, *w);
}

int64_t total(const FormatBytes& f) {
  int64_t n = 0;
  for (auto& [format, bytes] : f) n += bytes;
  return n;
}

}  // namespace

FormatBytes& operator+=(FormatBytes& a, const FormatBytes& b) {
  for (auto& [format, bytes] : b) a[format] += bytes;
  return a;
}

FormatBytes block_dense_format_bytes(const BlockWeights& b) {
  FormatBytes f;
  for (const HcWeights* h : {&b.hc_attn, &b.hc_ffn})
    for (const WeightView* w : {&h->fn, &h->base, &h->scale}) add(f, *w);
  add(f, b.attn_norm);
  add(f, b.ffn_norm);
  const AttentionWeights& a = b.attn;
  for (const WeightView* w : {&a.attn_sink, &a.wq_a, &a.q_norm, &a.wq_b, &a.wkv, &a.kv_norm, &a.wo_a, &a.wo_b}) add(f, *w);
  if (a.compressor) add_compressor(f, *a.compressor);
  if (a.indexer) {
    add(f, a.indexer->wq_b);
    add(f, a.indexer->weights_proj);
    add_compressor(f, a.indexer->compressor);
  }
  const MoeWeights& m = b.ffn;
  for (const WeightView* w : {&m.gate, &m.bias, &m.shared.w1, &m.shared.w2, &m.shared.w3}) add(f, *w);
  if (m.tid2eid.present()) f[m.tid2eid.format] += m.tid2eid.cols * 8;  // one token's row
  return f;
}

int64_t block_dense_bytes(const BlockWeights& b) { return total(block_dense_format_bytes(b)); }

FormatBytes experts_format_bytes(const MoeWeights& m, const std::set<int64_t>& selected) {
  FormatBytes f;
  for (int64_t e : selected) {
    const ExpertWeights& x = m.experts[size_t(e)];
    for (const WeightView* w : {&x.w1, &x.w2, &x.w3}) add(f, *w);
  }
  return f;
}

int64_t experts_bytes(const MoeWeights& m, const std::set<int64_t>& selected) {
  return total(experts_format_bytes(m, selected));
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
