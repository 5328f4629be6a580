// Bytes a step must read: weights (the rows a view covers, with their scales) and cache rows.
// The bench divides these by measured times to get GB/s.
#pragma once
#include <cstdint>
#include <map>
#include <set>

#include "cache/sequence_cache.h"
#include "model/weights.h"

namespace dsv4::bench {

// The bytes of the view's rows (and their scales): a view may cover fewer rows than its tensor.
int64_t view_bytes(const WeightView& w);

// Everything a block reads for every token except the routed experts: hyper-connections,
// norms, attention (with compressor/indexer), router and shared expert. Hash routing reads
// one tid2eid row per token (counted as k·8 bytes).
int64_t block_dense_bytes(const BlockWeights& b);
// The routed experts in `selected` (w1, w2, w3 with their scales).
int64_t experts_bytes(const MoeWeights& m, const std::set<int64_t>& selected);
// The same bytes by weight format (what each format's kernel must turn into products).
using FormatBytes = std::map<WeightFormat, int64_t>;
FormatBytes block_dense_format_bytes(const BlockWeights& b);
FormatBytes experts_format_bytes(const MoeWeights& m, const std::set<int64_t>& selected);
FormatBytes& operator+=(FormatBytes& a, const FormatBytes& b);

// Cache rows one decode row at `position` reads: the window's raw rows, the compressed entries
// it attends (all visible ones, or the indexer's top-k), and the indexer's keys.
int64_t cache_read_bytes(const LayerCacheGeometry& g, int64_t position, int64_t index_topk);

}  // namespace dsv4::bench
