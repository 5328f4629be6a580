#include "cache/sequence_cache.h"

#include <algorithm>

#include "cache/cache_journal.h"
#include "core/error.h"

namespace dsv4 {

LayerCacheGeometry cache_geometry_for(const ModelConfig& c, int64_t ratio) {
  LayerCacheGeometry g;
  g.head_dim = c.head_dim;
  g.window = c.sliding_window;
  g.ratio = ratio;
  if (ratio > 0) g.state_width = 2 * (ratio == 4 ? 2 : 1) * c.head_dim;
  if (ratio == 4) {
    g.index_head_dim = c.index_head_dim;
    g.index_state_width = 2 * 2 * c.index_head_dim;
  }
  return g;
}

CacheFootprint layer_cache_footprint(const LayerCacheGeometry& g, int64_t retain, int64_t rows_per_block) {
  // As release_unneeded keeps them: raw rows of the window and the rollback span; compressor
  // state rows from the block before the oldest position a rollback can reach.
  // Blocks: a bounded span of rows may straddle two partly used blocks, a growing table has one.
  CacheFootprint f;
  auto bounded = [&](int64_t rows, int64_t row_bytes) { f.fixed_bytes += (rows + 2 * rows_per_block) * row_bytes; };
  auto growing = [&](int64_t row_bytes) {
    f.fixed_bytes += rows_per_block * row_bytes;
    f.bytes_per_token += double(row_bytes) / double(g.ratio);
  };
  bounded(g.window + retain, 2 * g.head_dim);
  if (g.ratio > 0) {
    bounded(2 * g.ratio + retain, 4 * g.state_width);
    growing(2 * g.head_dim);
  }
  if (g.index_head_dim > 0) {
    bounded(2 * g.ratio + retain, 4 * g.index_state_width);
    growing(2 * g.index_head_dim);
  }
  return f;
}

CacheFootprint model_cache_footprint(const ModelConfig& c, int64_t retain) {
  CacheFootprint f;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) f += layer_cache_footprint(cache_geometry_for(c, c.compress_ratio(l)), retain);
  if (!c.has_dspark()) {
    for (int64_t m = 0; m < c.num_nextn_predict_layers; ++m) f += layer_cache_footprint(cache_geometry_for(c, 0), retain);
    return f;
  }
  // A DSpark stage's ring: the window's rows of verified positions (never rolled back: only
  // accepted rows are written) and, during a draft, the block's B rows after them.
  LayerCacheGeometry ring = cache_geometry_for(c, 0);
  ring.window = c.sliding_window + c.dspark_block_size;
  for (int64_t s = 0; s < c.num_drafter_layers(); ++s) f += layer_cache_footprint(ring, /*retain=*/0);
  return f;
}

RowPool* CachePools::get(DType dtype, int64_t row_elems) {
  auto& p = pools_[{dtype, row_elems}];
  if (!p) p = std::make_unique<RowPool>(memory_, dtype, row_elems, rows_per_block_);
  return p.get();
}

int64_t CachePools::bytes_in_use() const {
  int64_t total = 0;
  for (auto& [key, p] : pools_) total += p->blocks_allocated() * int64_t(p->block_bytes());
  return total;
}

int64_t CachePools::bytes_held() const {
  int64_t total = 0;
  for (auto& [key, p] : pools_) total += p->blocks_in_use() * int64_t(p->block_bytes());
  return total;
}

int64_t LayerCache::bytes_held() const {
  int64_t total = 0;
  for (const RowTable* t : {&kv, &state, &entries, &index_state, &index_keys}) total += t->bytes_held();
  return total;
}

int64_t CachePools::blocks_in_use() const {
  int64_t total = 0;
  for (auto& [key, p] : pools_) total += p->blocks_in_use();
  return total;
}

SequenceCache::SequenceCache(CachePools& pools, const std::vector<LayerCacheGeometry>& layers, int64_t retain,
                             int64_t local_begin, int64_t local_end, std::shared_ptr<CacheJournal> journal)
    : journal_(std::move(journal)), retain_(retain) {
  if (local_end < 0) local_end = int64_t(layers.size());
  layers_.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCacheGeometry& g = layers[i];
    LayerCache& c = layers_[i];
    c.geometry = g;
    c.local = int64_t(i) >= local_begin && int64_t(i) < local_end;
    if (!c.local) continue;
    c.kv = RowTable(pools.get(DType::BF16, g.head_dim));
    if (g.ratio > 0) {
      c.state = RowTable(pools.get(DType::F32, g.state_width));
      c.entries = RowTable(pools.get(DType::BF16, g.head_dim));
    }
    if (g.index_head_dim > 0) {
      c.index_state = RowTable(pools.get(DType::F32, g.index_state_width));
      c.index_keys = RowTable(pools.get(DType::BF16, g.index_head_dim));
    }
  }
  if (journal_) {
    id_ = journal_->next_id();
    journal_->record({CacheOp::New, id_});
  }
}

SequenceCache::~SequenceCache() {
  if (journal_) record(CacheOp::Release, 0);
}

void SequenceCache::record(int kind, int64_t a, int64_t b) const {
  if (journal_) journal_->record({CacheOp::Kind(kind), id_, a, b});
}

void SequenceCache::skip_to(int64_t length) {
  for (LayerCache& l : layers_)
    if (l.local) l.kv.skip_to(length);
  length_ = length;
  record(CacheOp::SkipTo, length);
}

void SequenceCache::keep_all_rows(bool keep) {
  keep_all_ = keep;
  record(CacheOp::KeepAll, keep ? 1 : 0);
}

void SequenceCache::truncate(int64_t new_length) {
  DSV4_CHECK(new_length >= 0 && new_length <= length_, "truncate: new length ", new_length,
             " is outside [0, ", length_, "]");
  DSV4_CHECK(new_length >= min_length_, "truncate: cannot roll back to length ", new_length,
             "; rows before length ", min_length_, " were released (rollback limit ", retain_, " tokens)");
  for (LayerCache& c : layers_) {
    if (!c.local) continue;
    c.kv.truncate(new_length);
    if (c.geometry.ratio > 0) {
      c.state.truncate(new_length);
      c.entries.truncate(new_length / c.geometry.ratio);
    }
    if (c.geometry.index_head_dim > 0) {
      c.index_state.truncate(new_length);
      c.index_keys.truncate(new_length / c.geometry.ratio);
    }
  }
  length_ = new_length;
  record(CacheOp::Truncate, new_length);
}

std::unique_ptr<SequenceCache> SequenceCache::fork(int64_t length, bool writable) const {
  DSV4_CHECK(length >= min_length_ && length <= length_, "cache fork at length ", length, ": the sequence holds ",
             length_, " tokens and keeps the rows of lengths from ", min_length_);
  std::unique_ptr<SequenceCache> f(new SequenceCache());
  f->length_ = length;
  f->retain_ = retain_;
  f->min_length_ = min_length_;
  f->keep_all_ = keep_all_;
  f->layers_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerCache& c = layers_[i];
    LayerCache& d = f->layers_[i];
    d.geometry = c.geometry;
    d.local = c.local;
    if (!c.local) continue;
    const int64_t entries = c.geometry.ratio > 0 ? length / c.geometry.ratio : 0;
    d.kv = c.kv.fork(length, writable);
    if (c.state.attached()) d.state = c.state.fork(length, writable);
    if (c.entries.attached()) d.entries = c.entries.fork(entries, writable);
    if (c.index_state.attached()) d.index_state = c.index_state.fork(length, writable);
    if (c.index_keys.attached()) d.index_keys = c.index_keys.fork(entries, writable);
  }
  if (journal_) {
    f->journal_ = journal_;
    f->id_ = journal_->next_id();
    journal_->record({CacheOp::Fork, f->id_, id_, length, writable});
  }
  return f;
}

int64_t SequenceCache::bytes_held() const {
  int64_t total = 0;
  for (const LayerCache& c : layers_) total += c.bytes_held();
  return total;
}

int64_t SequenceCache::shared_blocks() const {
  int64_t total = 0;
  for (const LayerCache& c : layers_)
    for (const RowTable* t : {&c.kv, &c.state, &c.entries, &c.index_state, &c.index_keys}) total += t->shared_blocks();
  return total;
}

void SequenceCache::release_unneeded() {
  if (keep_all_) return;
  // After a rollback to any length L >= length - retain, attention at position L needs raw
  // rows from L - window + 1 on, and the next compressed entry pools positions from
  // (L / ratio - 1) · ratio on (the overlapping compressor reads the previous block).
  const int64_t oldest = std::max<int64_t>(0, length_ - retain_);
  min_length_ = std::max(min_length_, oldest);
  for (LayerCache& c : layers_) {
    if (!c.local) continue;
    const LayerCacheGeometry& g = c.geometry;
    c.kv.release_before(std::max<int64_t>(0, oldest - g.window + 1));
    if (g.ratio > 0) {
      const int64_t first_state = std::max<int64_t>(0, (oldest / g.ratio - 1) * g.ratio);
      c.state.release_before(first_state);
      if (g.index_head_dim > 0) c.index_state.release_before(first_state);
    }
  }
}

}  // namespace dsv4
