#include "model/compressor.h"

namespace dsv4 {

Compressor::Compressor(const CompressorWeights& w, const ModelConfig& c, const RopeSpec& rope, Kind kind)
    : w_(w), norm_eps_(float(c.rms_norm_eps)), rope_dims_(c.qk_rope_head_dim), rope_(rope), kind_(kind) {}

void Compressor::store_state(Pass& p, const Tensor& x, size_t layer) const {
  const int64_t n = x.rows(), proj = w_.wkv.rows;
  Tensor kv = p.alloc({n, proj}), score = p.alloc({n, proj});
  // fp32 out, as the reference. The release's BF16 weights multiply the activations as they are;
  // FP8 blocks (compressed-tensors W4A16-FP8) quantize them per 128 inputs, as FP8 linears do.
  p.be.linear(x, w_.wkv, kv, {ActQuant::ByWeight, /*round_bf16=*/false});
  p.be.linear(x, w_.wgate, score, {ActQuant::ByWeight, /*round_bf16=*/false});
  std::vector<RowTable*> states(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    states[size_t(r)] = &state_table(p.cache(r, layer));
    states[size_t(r)]->ensure_rows(p.positions[size_t(r)] + 1);  // ops write reserved rows only
  }
  p.be.compressor_store(kv, score, w_.ape, p.positions, states);
}

void Compressor::finish(Pass& p, Tensor& pooled, const std::vector<int64_t>& entries) const {
  p.be.scale(pooled, 1.0f, pooled);  // the pooled fp32 values are cast to bf16 before the norm
  p.be.rms_norm(pooled, w_.norm, norm_eps_, pooled);
  std::vector<int64_t> first_positions(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) first_positions[i] = entries[i] * w_.ratio;
  p.be.rope(pooled, first_positions, rope_, /*inverse=*/false);
  if (kind_ == Kind::Indexer)
    p.be.hadamard_fp4(pooled);
  else
    p.be.fake_quant_fp8(pooled, w_.head_dim - rope_dims_, 64);
}

void Compressor::append(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const {
  store_state(p, x, layer);
  std::vector<PoolRequest> requests;
  std::vector<int64_t> entries, rows_of_entry;
  for (int64_t r = 0; r < p.rows(); ++r) {
    const int64_t pos = p.positions[size_t(r)];
    if ((pos + 1) % w_.ratio != 0) continue;  // an entry exists once its block is complete
    requests.push_back({&state_table(p.cache(r, layer)), pos / w_.ratio});
    entries.push_back(pos / w_.ratio);
    rows_of_entry.push_back(r);
  }
  if (requests.empty()) return;
  const int64_t m = int64_t(requests.size());
  Tensor pooled = p.alloc({m, w_.head_dim});
  p.be.compressor_pool(requests, w_.ratio, w_.overlap, w_.head_dim, pooled);
  const std::string prefix = kind_ == Kind::Indexer ? "indexer." : "";
  p.trace(scope, prefix + "compressed_kv_pooled", pooled);
  finish(p, pooled, entries);
  p.trace(scope, prefix + "compressed_kv", pooled);
  std::vector<RowTable*> tables(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    RowTable& table = entry_table(p.cache(rows_of_entry[size_t(i)], layer));
    table.ensure_rows(entries[size_t(i)] + 1);
    tables[size_t(i)] = &table;
  }
  p.be.store_rows(tables, entries, pooled);
}

}  // namespace dsv4
