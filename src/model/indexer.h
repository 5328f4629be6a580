// The indexer of ratio-4 (CSA) layers (spec §3 "Indexer"): scores the layer's compressed
// entries per query and selects the top-k that attention reads.
#pragma once
#include <optional>
#include <string>

#include "model/compressor.h"

namespace dsv4 {

class Indexer {
 public:
  Indexer(const IndexerWeights& w, const ModelConfig& c, const RopeSpec& rope);

  // Runs the indexer's own compressor over the pass's rows: its keys, for every row.
  void extend(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const {
    compressor_.append(p, x, layer, scope);
  }
  // The selected entries [N, index_topk] (I32, −1 padded) for each row of the pass (which may be
  // a subset of the rows extend() saw).
  Tensor select(Pass& p, const Tensor& x, const Tensor& qr, size_t layer, const std::string& scope) const;

  // Components, exposed for tests:
  Tensor query(Pass& p, const Tensor& qr) const;         // [N, ih, id]: RoPE, Hadamard, FP4
  Tensor head_weights(Pass& p, const Tensor& x) const;   // [N, ih]: weights_proj · id^−½ · ih^−½
  Tensor top_k(Pass& p, const Tensor& q, const Tensor& weights, size_t layer, const std::string& scope) const;
  const Compressor& compressor() const { return compressor_; }

 private:
  const IndexerWeights& w_;
  int64_t heads_, head_dim_, top_k_, ratio_;
  RopeSpec rope_;
  Compressor compressor_;
};

}  // namespace dsv4
