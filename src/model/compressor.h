// The KV compressor of a ratio-R layer (spec §3 "Compressor").
//
// Per position: c = wkv·x, z = wgate·x + ape[pos mod R] (fp32), kept as a state row.
// When a block of R positions completes, entry i = Σ softmax_over_slots(z) ⊙ c over its
// slots (ratio 4 also pools the previous block through the first half of the dims),
// then RMSNorm, RoPE at position i·R, and the precision step of its kind: FP8 on the
// non-rope dims (attention keys) or Hadamard + FP4 (indexer keys).
#pragma once
#include <string>
#include <vector>

#include "model/pass.h"
#include "model/weights.h"

namespace dsv4 {

class Compressor {
 public:
  enum class Kind { Attention, Indexer };

  Compressor(const CompressorWeights& w, const ModelConfig& c, const RopeSpec& rope, Kind kind);

  // Adds the pass's positions to each sequence's state and emits the completed entries.
  void append(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const;

  // Components, exposed for tests:
  // state rows (kv | score + ape) of x's rows at the pass's positions
  void store_state(Pass& p, const Tensor& x, size_t layer) const;
  // the finished entries from pooled [M, w] fp32 for entry indices `entries` (in place)
  void finish(Pass& p, Tensor& pooled, const std::vector<int64_t>& entries) const;

  RowTable& state_table(LayerCache& c) const { return kind_ == Kind::Attention ? c.state : c.index_state; }
  RowTable& entry_table(LayerCache& c) const { return kind_ == Kind::Attention ? c.entries : c.index_keys; }
  int64_t ratio() const { return w_.ratio; }
  int64_t width() const { return w_.head_dim; }

 private:
  const CompressorWeights& w_;
  float norm_eps_;
  int64_t rope_dims_;
  RopeSpec rope_;
  Kind kind_;
};

}  // namespace dsv4
