// The multi-token-prediction module (spec §4): a ratio-0 block fed with the target's
// streams at position t and the embedding of token t+1, predicting token t+2.
//
//   X'_j = h_proj(hnorm(X_t,j)) + e_proj(enorm(embed[token_{t+1}]))   for each stream j
//   logits = head(norm(hc_head(Block(X'))))     (the target's embedding and head, borrowed)
//
// It keeps its own paged KV cache (own pools and block tables, one KV head of head_dim).
// Rows are appended at positions like the target's: a pass over rows t..t+n−1 of a
// sequence pairs the given streams with the given tokens.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dsv4 {

struct MtpOptions {
  int64_t vocab_limit = 0;    // draft LM head over the first N vocabulary rows only (0 = all)
  int64_t max_rollback = 16;
  // The draft LM head when not the target's: a copy of its first rows in another format (the
  // engine's DraftHead; must outlive the module). Null: the target's head (vocab_limit rows).
  const WeightView* head = nullptr;
  // With a copied head: each draft row's `rescore` largest logits are recomputed with the target's
  // exact head rows (model/head_rescore.h), so that greedy drafts are the target head's.
  int64_t rescore = 64;
};

class MtpModule {
 public:
  MtpModule(const Transformer& target, const MtpWeights& weights, MtpOptions options = {});

  std::unique_ptr<SequenceCache> new_sequence();

  // The input streams [n, hc·D] (the target's, or the MTP's own when chaining), one per token,
  // come from one of two places: host memory (tools and tests that teacher-force), or rows
  // [length, length + n) of a table in backend memory (the proposer's: nothing crosses to the host).
  struct Request {
    SequenceCache* sequence = nullptr;
    const float* host_streams = nullptr;
    std::span<const int32_t> tokens;      // [n]: the token after each stream's position
    bool all_logits = false;
    bool no_logits = false;               // rows for the cache only (a long prompt's): no head at all
    const RowTable* stream_rows = nullptr;
  };
  // Logits and output streams come for the rows that ask for logits (every row of an all_logits
  // request, the last of others, none of a no_logits one): the other rows only extend the cache,
  // and skip the block's attention output and MoE (their outputs are never read).
  struct Output {
    std::vector<float> logits;            // [logit rows, vocab()]
    std::vector<int64_t> logits_begin;    // first logit row of each request
    Tensor streams;                       // [logit rows, hc, D] in backend memory: the block's output (chained input)
    Backend* backend = nullptr;           // holds `streams` (until the next forward)
    int64_t vocab = 0, hidden_width = 0;
    const float* logits_row(size_t request, int64_t i = 0) const { return logits.data() + (logits_begin[request] + i) * vocab; }
    Tensor streams_rows(size_t request, int64_t first, int64_t n) const {
      return streams.slice(logits_begin[request] + first, logits_begin[request] + first + n);
    }
    std::vector<float> streams_host() const;  // [logit rows, hc·D] (tools and tests)
  };
  void forward(std::span<const Request> requests, Output& out, Tracer* tracer = nullptr);

  int64_t vocab() const { return head_view_.rows; }        // the draft head's rows
  const WeightView& head() const { return head_view_; }     // the draft head
  int64_t target_vocab() const { return c_.vocab_size; }
  Backend& backend() const { return target_.backend(); }
  int64_t hidden_width() const { return c_.hc_mult * c_.hidden_size; }
  int64_t window() const { return c_.sliding_window; }  // the rows its window-only attention reads
  const Block& block() const { return block_; }
  const MtpWeights& weights() const { return w_; }
  CachePools& pools() { return pools_; }
  // Rows through the module so far, and those of them that went on past the caches.
  struct Counts {
    int64_t rows = 0, output_rows = 0;
  };
  const Counts& counts() const { return counts_; }

  // The combiner (exposed for tests): streams [N, hc, D] and tokens → the block input [N, hc, D].
  Tensor combine(Pass& p, const Tensor& streams) const;

 private:
  const Transformer& target_;
  const ModelConfig& c_;
  const MtpWeights& w_;
  MtpOptions options_;
  Workspace workspace_;
  HeadRescoreScratch rescore_scratch_;
  CachePools pools_;
  std::vector<LayerCacheGeometry> geometry_;
  Block block_;
  WeightView head_view_;
  Counts counts_;   // the draft head: the target's (possibly limited to the first rows) or options.head
};

}  // namespace dsv4
