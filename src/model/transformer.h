// The DeepSeek-V4 target model (spec §3 "Model"): embed → hc copies → blocks → hc_head →
// norm → head, over batches of sequences whose state lives in paged caches.
//
// forward() appends each request's tokens to its sequence at positions length..length+n−1:
// a prefill (length 0), a decode (one token) and an extend (n tokens anywhere) are the
// same computation, and give bit-identical rows however the tokens are split into calls.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "model/argmax_head.h"
#include "model/block.h"
#include "model/head_rescore.h"
#include "model/stage_link.h"

namespace dsv4 {

struct TransformerOptions {
  int64_t max_rollback = 16;  // tokens a sequence can be truncated back by
};

class Transformer {
 public:
  Transformer(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
              TransformerOptions options = {});

  std::unique_ptr<SequenceCache> new_sequence();

  struct Request {
    SequenceCache* sequence = nullptr;
    std::span<const int32_t> tokens;
    bool all_logits = false;  // logits of every row (verification), else of the last row only
    bool no_logits = false;   // no logits at all (a chunk of a prompt that is not its last)
    bool prompt = false;      // rows of a prompt (before the others): the backend's prompt kernels
    bool streams = true;      // Output::hidden has every row (the MTP reads them), else only the logit rows
    // Its logits are only read for their argmax (greedy, no mask, no logprobs): when every request
    // with logits in the pass says so, the bounded head may serve them — exact values where a row
    // can reach its argmax, −∞ elsewhere (model/argmax_head.h).
    bool argmax_only = false;
    // With streams: the rows before this one need none (a long prompt's rows before a drafter's
    // window): the last block only extends its caches there, as for a request without streams.
    int64_t streams_from = 0;
  };
  // Logits come to the host (they are sampled); the streams stay in backend memory, where the
  // MTP module reads them, until the next forward().
  struct Output {
    std::vector<float> logits;          // [logit rows, V]
    std::vector<int64_t> logits_begin;  // first logit row of each request
    // [rows, hc, D] in backend memory: the streams after the last block of every row of the
    // requests that ask for them (Request::streams) and of the logit rows of the others.
    Tensor hidden;
    std::vector<int64_t> rows_begin;    // first row of each request in `hidden`
    // With taps (set_taps): [rows of `hidden`, taps·D] in backend memory, row i the mean of the
    // streams after each tapped block, side by side (the DSpark drafter's input).
    Tensor taps;
    Backend* backend = nullptr;         // holds `hidden` and `taps`
    const float* logits_row(size_t request, int64_t i = 0) const;
    // Rows [first, first + n) of request's streams (backend memory).
    Tensor hidden_rows(size_t request, int64_t first, int64_t n) const;
    // All streams copied to the host, [rows, hc·D] (tools and tests).
    std::vector<float> hidden_host() const;
    std::vector<float> taps_host() const;  // [rows, taps·D] (tools and tests)
    int64_t vocab = 0, hidden_width = 0;
  };
  void forward(std::span<const Request> requests, Output& out, Tracer* tracer = nullptr);

  // The final hc_head → norm → head on streams [N, hc, D], fp32 logits [N, rows of `head`].
  // The MTP module calls it with its own hc_head and norm (and possibly fewer head rows).
  void head(Pass& p, const Tensor& streams, const HcHeadWeights& hc, const WeightView& norm,
            const WeightView& head, Tensor& logits, const std::string& scope) const;
  // The head's input: hc_head → norm, y [N, D].
  Tensor head_input(Pass& p, const Tensor& streams, const HcHeadWeights& hc, const WeightView& norm,
                    const std::string& scope) const;
  // head() on rows `rows` of x [N, hc, D] only, logits copied to `host` ([rows, head.rows]).
  // With `rescore`, `head` is a rounded copy and each row's largest logits are computed again with
  // the exact head's rows (model/head_rescore.h).
  void head_rows(Pass& p, const Tensor& x, std::span<const int64_t> rows, const HcHeadWeights& hc,
                 const WeightView& norm, const WeightView& head, std::vector<float>& host,
                 const std::string& scope, const HeadRescore& rescore = {}) const;

  // The bounded head's copy (its bytes outlive the Transformer's use; disabled: {}), and the most
  // candidates a row may have before the pass falls back to the full head.
  void set_argmax_head(const ArgmaxHead& head, int64_t max_candidates = 4096);
  // Blocks whose output streams every pass also reduces to their mean (Output::taps), ascending.
  void set_taps(std::vector<int64_t> layers);
  const std::vector<int64_t>& taps() const { return taps_; }
  const ArgmaxHeadCounts& argmax_head_counts() const { return argmax_counts_; }
  // Rows the last block has computed in full (their streams or logits read), over every pass.
  int64_t last_block_rows() const { return last_block_rows_; }

  // Pipeline stages (model/stage_link.h): this process holds the layers of its stage, and its
  // caches those layers' rows. On stage 0 forward() runs every pass across the stages; the other
  // stages serve forward_stage() for each message until told to stop.
  void set_stage_link(StageLink* link);
  StageLink* stage_link() const { return link_; }
  // Stage s > 0: the message's micro-batch over this stage's layers, on its copies of the caches;
  // the message's streams (and taps) become this stage's output.
  void forward_stage(StageMessage& m, const StageHeader& h, const CacheMirror& mirror);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Backend& backend() const { return backend_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  const std::vector<LayerCacheGeometry>& cache_geometry() const { return geometry_; }
  CachePools& pools() { return pools_; }
  const TransformerOptions& options() const { return options_; }

 private:
  Tensor head_input_rows(Pass& p, const Tensor& x, std::span<const int64_t> rows, const HcHeadWeights& hc,
                         const WeightView& norm, const std::string& scope) const;
  void full_head(Pass& p, const Tensor& y, const WeightView& head, std::vector<float>& host) const;
  // The rows of a pass (p.add_requests) and the ones whose streams leave the last block (`kept`;
  // rows_begin becomes each request's first row among them).
  void begin_pass(Pass& p, std::span<const Request> requests, std::vector<int64_t>& rows_begin,
                  std::vector<int64_t>& logits_begin, std::vector<int64_t>& logit_rows,
                  std::vector<int64_t>& kept) const;
  // Blocks [begin, end) over the streams x (the last block over the kept rows only), the taps
  // among them into `tapped` (indexed as taps_).
  void run_layers(Pass& p, Tensor& x, int64_t begin, int64_t end, std::span<const int64_t> kept,
                  std::span<Tensor> tapped);
  // The head over the kept rows' streams x, and the output.
  void finish_pass(Pass& p, std::span<const Request> requests, const Tensor& x, std::span<const int64_t> logit_rows,
                   std::span<const Tensor> tapped, Output& out);
  void forward_staged(std::span<const Request> requests, Output& out);  // (transformer_stages.cc)

  const ModelConfig& config_;
  const ModelWeights& weights_;
  Backend& backend_;
  TransformerOptions options_;
  Workspace workspace_;
  std::vector<int64_t> kept_rows_, identity_rows_;  // forward()'s row lists, kept: no allocation per pass
  CachePools pools_;
  std::vector<LayerCacheGeometry> geometry_;
  std::vector<Block> blocks_;
  std::vector<int64_t> taps_;
  ArgmaxHead argmax_head_;
  int64_t argmax_max_candidates_ = 4096;
  ArgmaxHeadScratch argmax_scratch_;
  ArgmaxHeadCounts argmax_counts_;
  int64_t last_block_rows_ = 0;
  StageLink* link_ = nullptr;
  int64_t staged_passes_ = 0;
};

}  // namespace dsv4
