// The DSpark drafter of DeepSeek-V4-Flash-0731 (spec: dspark.md): a few ordinary V4 blocks
// ("stages", stored as mtp.N.*) that draft a block of B tokens in one pass, conditioned on the
// target's streams.
//
//   main_x[p]  = main_norm(main_proj([mean_j X(l)[p, j] for each tapped target block l]))
//   ring_s[p]  = fp8(rope_p(kv_norm_s(wkv_s(main_x[p]))))         stage s's context row of position p
//   h          = Stage_{S-1}(... Stage_0(embed([anchor, noise, ..., noise]) on every stream))
//                each stage a V4 block (hyper-connections, score-routed MoE) whose attention sees
//                the ring's last W rows and every row of the block (not causal), with the sink
//   x          = hc_head(h);  base = head(norm(x))                the target's LM head
//   logits[k]  = base[k] + W2 · W1[prev_k]     prev_0 = anchor, prev_k = draft k (chosen from row k-1)
//   conf[k]    = proj · [x[k] ; W1[prev_k]]    a raw logit: sigmoid(conf[k]) is draft k+1's survival
//
// The block sits at positions L .. L+B-1 after the L positions of context; its rows are written
// into the stages' caches for the pass and dropped after it, so a sequence's drafter state is only
// its rings, written for verified positions. The head side is split out (markov_bias, confidence)
// because row k's bias needs the token chosen from row k-1: the caller chooses.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "model/transformer.h"

namespace dsv4 {

class DSparkDrafter {
 public:
  DSparkDrafter(const Transformer& target, const DSparkWeights& weights);

  // A sequence's rings: one window-only cache layer per stage. Its length is the context written.
  std::unique_ptr<SequenceCache> new_sequence();

  // Context rows of one sequence: `n` positions from its length on, of which only the last `keep`
  // are written, from rows [row, row + keep) of the taps tensor (rows older than the ring at the
  // next draft are never read: a long prompt's, which have no taps); the others only advance the length.
  struct Context {
    SequenceCache* sequence = nullptr;
    int64_t row = 0, n = 0, keep = 0;
  };
  // Writes the ring rows of every stage; `taps` [rows, taps·D] (Transformer::Output::taps, or
  // uploaded). main_x, when asked for: the written rows' [Σ keep, D] on the host.
  void extend_context(std::span<const Context> rows, const Tensor& taps, std::vector<float>* main_x = nullptr,
                      Tracer* tracer = nullptr);

  // One draft block per sequence, after its context: rows at positions L .. L+B-1.
  struct BlockRequest {
    SequenceCache* sequence = nullptr;
    int32_t anchor = 0;
    int64_t rows = 0;  // block rows whose logits are wanted: 0 .. rows-1 (1 <= rows <= B)
  };
  struct Output {
    std::vector<float> base_logits;     // [Σ rows, V]: before the Markov bias
    std::vector<int64_t> rows_begin;    // first row of each block in base_logits / head_hidden
    Tensor head_hidden;                 // [Σ rows, D] in backend memory: x before the norm (until the next draft)
    int64_t vocab = 0;
    const float* base_row(size_t block, int64_t k) const { return base_logits.data() + (rows_begin[block] + k) * vocab; }
  };
  void draft(std::span<const BlockRequest> blocks, Output& out, Tracer* tracer = nullptr);

  // W2 · W1[prev[i]] for each i: [n, V] fp32 on the host.
  void markov_bias(std::span<const int32_t> prev, std::vector<float>& host);
  // proj · [x ; W1[prev[i]]] for head_hidden rows `rows[i]` of the last draft: [n] raw logits.
  void confidence(const Output& out, std::span<const int64_t> rows, std::span<const int32_t> prev,
                  std::vector<float>& host);

  // Stage s's ring rows of `positions` ([n, head_dim] on the host: tools and tests).
  std::vector<float> ring_rows(SequenceCache& rings, size_t stage, std::span<const int64_t> positions);

  int64_t block_size() const { return c_.dspark_block_size; }
  int64_t window() const { return c_.sliding_window; }  // ring rows a draft reads
  int64_t stages() const { return int64_t(stages_.size()); }
  int64_t taps_width() const { return int64_t(c_.dspark_target_layer_ids.size()) * c_.hidden_size; }
  int64_t vocab() const { return c_.vocab_size; }
  const std::vector<Block>& stage_blocks() const { return stages_; }
  const DSparkWeights& weights() const { return w_; }
  Backend& backend() const { return target_.backend(); }
  CachePools& pools() { return pools_; }
  // Rows through the stages (block rows) and ring rows written so far.
  struct Counts {
    int64_t block_rows = 0, context_rows = 0, skipped_context_rows = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  const Transformer& target_;
  const ModelConfig& c_;
  const DSparkWeights& w_;
  Workspace workspace_;  // the draft pass (head_hidden lives here until the next draft)
  Workspace small_;      // context rows, Markov bias, confidence
  CachePools pools_;
  std::vector<LayerCacheGeometry> geometry_;
  std::vector<Block> stages_;
  Counts counts_;
};

}  // namespace dsv4
