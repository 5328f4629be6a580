#include "model/attention.h"

#include <cmath>

#include "core/error.h"

#include "model/rope.h"

namespace dsv4 {

Attention::Attention(const AttentionWeights& w, const ModelConfig& c, int64_t compress_ratio, int64_t draft_block)
    : w_(w), heads_(c.num_attention_heads), head_dim_(c.head_dim), rope_dims_(c.qk_rope_head_dim),
      groups_(c.o_groups), window_(c.sliding_window), ratio_(compress_ratio), draft_block_(draft_block),
      eps_(float(c.rms_norm_eps)), rope_(rope_for_layer(c, compress_ratio)) {
  DSV4_CHECK(draft_block == 0 || compress_ratio == 0, "a draft block's attention has no compressor (ratio ",
             compress_ratio, ")");
  if (w.compressor) compressor_.emplace(*w.compressor, c, rope_, Compressor::Kind::Attention);
  if (w.indexer) indexer_.emplace(*w.indexer, c, rope_);
}

Tensor Attention::low_rank_query(Pass& p, const Tensor& x) const {
  Tensor qr = p.alloc({x.rows(), w_.wq_a.rows});
  p.be.linear(x, w_.wq_a, qr);
  p.be.rms_norm(qr, w_.q_norm, eps_, qr);
  return qr;
}

Tensor Attention::query(Pass& p, const Tensor& qr) const {
  const int64_t n = qr.rows();
  Tensor q = p.alloc({n, heads_ * head_dim_});
  p.be.linear(qr, w_.wq_b, q);
  q = q.reshape({n, heads_, head_dim_});
  p.be.head_rms_norm(q, eps_);
  p.be.rope(q, p.positions, rope_, false);
  return q;
}

Tensor Attention::key_value(Pass& p, const Tensor& x, Tensor* normed) const {
  Tensor kv = p.alloc({x.rows(), head_dim_});
  p.be.linear(x, w_.wkv, kv);
  p.be.rms_norm(kv, w_.kv_norm, eps_, kv);
  if (normed) {
    *normed = p.alloc({x.rows(), head_dim_});
    p.be.scale(kv, 1.0f, *normed);
  }
  p.be.rope(kv, p.positions, rope_, false);
  p.be.fake_quant_fp8(kv, head_dim_ - rope_dims_, 64);  // rope dims stay bf16
  return kv;
}

void Attention::store_key_value(Pass& p, const Tensor& kv, size_t layer) const {
  std::vector<RowTable*> tables(size_t(p.rows()));
  for (int64_t r = 0; r < p.rows(); ++r) {
    RowTable& kv_rows = p.cache(r, layer).kv;
    kv_rows.ensure_rows(p.positions[size_t(r)] + 1);
    tables[size_t(r)] = &kv_rows;
  }
  p.be.store_rows(tables, p.positions, kv);
}

Tensor Attention::attend(Pass& p, const Tensor& q, const Tensor* selected, size_t layer) const {
  const int64_t n = q.dim(0);
  std::vector<AttentionRow> rows(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    LayerCache& cache = p.cache(r, layer);
    const int64_t pos = p.positions[size_t(r)];
    AttentionRow& row = rows[size_t(r)];
    row.kv = &cache.kv;
    row.position = pos;
    row.window = window_;
    if (draft_block_ > 0) {  // the block's rows follow the sequence's context: the window before it, and all of it
      const int64_t first = p.sequences[size_t(p.sequence_of_row[size_t(r)])]->length();
      DSV4_CHECK(pos >= first && pos < first + draft_block_, "draft block row at position ", pos,
                 " outside its block [", first, ", ", first + draft_block_, ")");
      row.position = first + draft_block_ - 1;
      row.window = window_ + draft_block_;
    }
    if (ratio_ > 0) {
      row.entries = &cache.entries;
      row.num_entries = (pos + 1) / ratio_;  // complete blocks up to and including this position
    }
  }
  Tensor o = p.alloc({n, heads_, head_dim_});
  p.be.sparse_attention(q, rows, selected, w_.attn_sink, float(1.0 / std::sqrt(double(head_dim_))), o);
  return o;
}

Tensor Attention::project_out(Pass& p, Tensor& o) const {
  const int64_t n = o.dim(0);
  p.be.rope(o, p.positions, rope_, /*inverse=*/true);
  Tensor low_rank = p.alloc({n, w_.wo_a.rows});
  Tensor flat = o.reshape({n, heads_ * head_dim_});
  p.be.grouped_linear(flat, w_.wo_a, groups_, low_rank, {ActQuant::None, true});
  Tensor out = p.alloc({n, w_.wo_b.rows});
  p.be.linear(low_rank, w_.wo_b, out);
  return out;
}

Tensor Attention::forward(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const {
  extend_caches(p, x, layer, scope);
  return output(p, x, layer, scope);
}

void Attention::extend_caches(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const {
  Tensor kv_normed;
  Tensor kv = key_value(p, x, p.tracing() ? &kv_normed : nullptr);
  if (p.tracing()) p.trace(scope, "kv_normed", kv_normed);
  p.trace(scope, "kv", kv);
  store_key_value(p, kv, layer);
  if (indexer_) indexer_->extend(p, x, layer, scope);
  if (compressor_) compressor_->append(p, x, layer, scope);
}

Tensor Attention::output(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const {
  Tensor qr = low_rank_query(p, x);
  p.trace(scope, "qr", qr);
  Tensor selected;
  if (indexer_) selected = indexer_->select(p, x, qr, layer, scope);
  Tensor q = query(p, qr);
  p.trace(scope, "q", q);
  Tensor o = attend(p, q, indexer_ ? &selected : nullptr, layer);
  p.trace(scope, "attn_o", o);
  Tensor out = project_out(p, o);
  p.trace(scope, "attn_out", out);
  return out;
}

}  // namespace dsv4
