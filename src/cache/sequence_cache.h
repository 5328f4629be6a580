// Per-sequence state of the attention layers, in paged row tables.
//
// Every row is addressed by the position (or compressed entry) it belongs to, so the
// state after processing L tokens is exactly "the rows below L" — the compressor's
// pending block is just its per-position state rows past the last complete block.
// Rolling back (truncate) therefore only drops rows; rows that rejected drafts wrote
// disappear with them. Rows are kept for `retain` positions beyond what attention
// needs, so that any rollback of up to `retain` tokens finds every row it needs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cache/row_pool.h"
#include "core/device_memory.h"
#include "io/config.h"

namespace dsv4 {

// The row pools of one model (target or draft), shared by all its sequences.
class CachePools {
 public:
  explicit CachePools(DeviceMemory& memory, int64_t rows_per_block = 64)
      : memory_(memory), rows_per_block_(rows_per_block) {}
  RowPool* get(DType dtype, int64_t row_elems);
  int64_t bytes_in_use() const;     // bytes of the chunks allocated from the backend
  int64_t blocks_in_use() const;    // blocks held by sequences (0 when every sequence is gone)
  int64_t bytes_held() const;       // bytes of those blocks

 private:
  DeviceMemory& memory_;
  int64_t rows_per_block_;
  std::map<std::pair<DType, int64_t>, std::unique_ptr<RowPool>> pools_;
};

struct LayerCacheGeometry {
  int64_t head_dim = 0;           // raw KV row width
  int64_t window = 0;
  int64_t ratio = 0;              // 0: window only
  int64_t state_width = 0;        // compressor state row: [kv | score] (2 · projection width)
  int64_t index_head_dim = 0;     // > 0 when the layer has an indexer
  int64_t index_state_width = 0;
};

// The cache geometry of a layer of model `c` with this compression ratio (0: window only).
LayerCacheGeometry cache_geometry_for(const ModelConfig& c, int64_t compress_ratio);

// What one sequence's cache holds for a layer: a part bounded by the window, the rollback limit
// (`retain`) and the compressors' pending blocks, and a part that grows with the context — one
// compressed entry (bf16, head_dim) and, with an indexer, one key (bf16, index_head_dim) per
// `ratio` positions. V4-Flash: CSA 256 + 64 = 320 B per token, HCA 8 B, window-only layers 0.
struct CacheFootprint {
  int64_t fixed_bytes = 0;
  double bytes_per_token = 0;
  int64_t at(int64_t tokens) const { return fixed_bytes + int64_t(bytes_per_token * double(tokens)); }
  CacheFootprint& operator+=(const CacheFootprint& o) {
    fixed_bytes += o.fixed_bytes;
    bytes_per_token += o.bytes_per_token;
    return *this;
  }
};
// (Rows live in blocks of `rows_per_block`: the bound counts the partly used blocks too.)
CacheFootprint layer_cache_footprint(const LayerCacheGeometry& g, int64_t retain, int64_t rows_per_block = 64);

// One sequence of the whole model: the target's layers and the MTP module's (window only), or a
// DSpark drafter's rings (one window-only layer per stage: the window plus a draft block, no rollback).
CacheFootprint model_cache_footprint(const ModelConfig& c, int64_t retain);

struct LayerCache {
  LayerCacheGeometry geometry;
  bool local = true;      // false: another pipeline stage holds this layer (its tables stay empty)
  RowTable kv;            // raw KV rows by position (bf16 values)
  RowTable state;         // compressor per-position [kv | score + ape] (f32)
  RowTable entries;       // compressed KV entries (bf16 values)
  RowTable index_state;   // indexer compressor per-position state (f32)
  RowTable index_keys;    // indexer compressed keys (bf16 values)

  int64_t bytes_held() const;  // bytes of the blocks its tables hold (what layer_cache_footprint bounds)
};

class CacheJournal;

class SequenceCache {
 public:
  // Layers [local_begin, local_end) are this process's (the rest another pipeline stage's; -1:
  // to the last). With a journal, every change but a pass's is recorded for the other stages'
  // copies (cache/cache_journal.h).
  SequenceCache(CachePools& pools, const std::vector<LayerCacheGeometry>& layers, int64_t retain,
                int64_t local_begin = 0, int64_t local_end = -1, std::shared_ptr<CacheJournal> journal = nullptr);
  ~SequenceCache();
  SequenceCache(const SequenceCache&) = delete;
  SequenceCache& operator=(const SequenceCache&) = delete;
  int64_t journal_id() const { return id_; }  // 0 without a journal

  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  int64_t retain() const { return retain_; }
  LayerCache& layer(size_t i) { return layers_[i]; }
  const LayerCache& layer(size_t i) const { return layers_[i]; }
  size_t num_layers() const { return layers_.size(); }

  // Returns the state to what it was after `new_length` tokens. Throws if that needs rows
  // already released (a rollback longer than `retain` tokens).
  void truncate(int64_t new_length);
  // Moves the length to `length` without computing the rows before it, which no later position
  // reads (window-only layers: a drafter's rows before the window its next draft reads). Blocks
  // holding only such rows are released.
  void skip_to(int64_t length);
  // Releases rows no rollback of up to `retain` tokens can need any more.
  void release_unneeded();
  // The earliest length truncate() can still return to.
  int64_t min_truncate_length() const { return min_length_; }
  void restore_min_truncate_length(int64_t n) { min_length_ = n; }  // (a state read back from disk)

  // Keeps every row (release_unneeded() releases nothing): the state after any length L <= length()
  // stays recoverable, so the prefix cache can cut this sequence anywhere.
  // keep_all_rows(false): back to releasing what no rollback needs (from the next pass on).
  void keep_all_rows(bool keep = true);
  bool keeps_all_rows() const { return keep_all_; }
  // The state after `length` tokens (min_truncate_length() <= length <= length()), sharing this
  // one's blocks (fork() in row_pool.h): `writable` for a sequence that goes on from there, not
  // for a snapshot that is only read or forked again. It keeps this one's retain and keep-all.
  std::unique_ptr<SequenceCache> fork(int64_t length, bool writable = true) const;
  int64_t bytes_held() const;    // of the blocks it holds (shared ones included)
  int64_t shared_blocks() const; // blocks another holder holds too

 private:
  SequenceCache() = default;
  void record(int kind, int64_t a, int64_t b = 0) const;
  std::shared_ptr<CacheJournal> journal_;
  int64_t id_ = 0;
  bool keep_all_ = false;
  int64_t length_ = 0;
  int64_t retain_ = 0;
  int64_t min_length_ = 0;
  std::vector<LayerCache> layers_;
};

}  // namespace dsv4
