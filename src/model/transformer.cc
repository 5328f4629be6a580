#include "model/transformer.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace dsv4 {

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, Backend& backend,
                         TransformerOptions options)
    : config_(config), weights_(weights), backend_(backend), options_(options), workspace_(backend),
      pools_(backend) {
  blocks_.reserve(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    geometry_.push_back(cache_geometry_for(config, weights.layers[l].compress_ratio));
    blocks_.emplace_back(weights.layers[l], config, "L" + std::to_string(l), l);
  }
}

std::unique_ptr<SequenceCache> Transformer::new_sequence() {
  if (!link_) return std::make_unique<SequenceCache>(pools_, geometry_, options_.max_rollback);
  // A stage's caches hold its own layers; stage 0's record what the other stages replay.
  const int s = link_->stage();
  return std::make_unique<SequenceCache>(pools_, geometry_, options_.max_rollback, link_->first_layer(s),
                                         link_->first_layer(s + 1), s == 0 ? link_->journal() : nullptr);
}

void Transformer::set_stage_link(StageLink* link) {
  DSV4_CHECK(!link || (link->first_layer(0) == 0 && link->first_layer(link->stages()) == int64_t(blocks_.size())),
             "pipeline stages: the layer ranges do not cover the model's ", blocks_.size(), " layers");
  link_ = link;
}

const float* Transformer::Output::logits_row(size_t request, int64_t i) const {
  return logits.data() + (logits_begin[request] + i) * vocab;
}

Tensor Transformer::Output::hidden_rows(size_t request, int64_t first, int64_t n) const {
  const int64_t begin = rows_begin[request] + first;
  return hidden.slice(begin, begin + n);
}

std::vector<float> Transformer::Output::hidden_host() const {
  std::vector<float> host(size_t(hidden.numel()));
  if (!host.empty()) backend->to_host(hidden, host.data());
  return host;
}

std::vector<float> Transformer::Output::taps_host() const {
  std::vector<float> host(size_t(taps.numel()));
  if (!host.empty()) backend->to_host(taps, host.data());
  return host;
}

void Transformer::set_taps(std::vector<int64_t> layers) {
  for (size_t i = 0; i < layers.size(); ++i)
    DSV4_CHECK(layers[i] >= 0 && layers[i] < int64_t(blocks_.size()) && (i == 0 || layers[i] > layers[i - 1]),
               "taps: layer ", layers[i], " is not an ascending layer of the ", blocks_.size());
  taps_ = std::move(layers);
}

Tensor Transformer::head_input(Pass& p, const Tensor& streams, const HcHeadWeights& hc, const WeightView& norm,
                               const std::string& scope) const {
  const int64_t n = streams.dim(0), D = config_.hidden_size;
  Tensor y = p.alloc({n, D});
  p.be.hc_head(streams, hc, float(config_.hc_eps), float(config_.rms_norm_eps), y);
  p.trace(scope, "hc_head_y", y);
  p.be.rms_norm(y, norm, float(config_.rms_norm_eps), y);
  p.trace(scope, "normed", y);
  return y;
}

void Transformer::head(Pass& p, const Tensor& streams, const HcHeadWeights& hc, const WeightView& norm,
                       const WeightView& head, Tensor& logits, const std::string& scope) const {
  const Tensor y = head_input(p, streams, hc, norm, scope);
  p.be.linear(y, head, logits, {ActQuant::None, /*round_bf16=*/false});
}

void Transformer::head_rows(Pass& p, const Tensor& x, std::span<const int64_t> rows, const HcHeadWeights& hc,
                            const WeightView& norm, const WeightView& head_w, std::vector<float>& host,
                            const std::string& scope, const HeadRescore& rescore) const {
  const int64_t m = int64_t(rows.size());
  host.resize(size_t(m * head_w.rows));
  if (m == 0) return;
  const Tensor y = head_input_rows(p, x, rows, hc, norm, scope);
  full_head(p, y, head_w, host);
  if (rescore.enabled()) rescore_top_logits(p, y, rescore, head_w.rows, host);
}

Tensor Transformer::head_input_rows(Pass& p, const Tensor& x, std::span<const int64_t> rows,
                                    const HcHeadWeights& hc, const WeightView& norm, const std::string& scope) const {
  const int64_t m = int64_t(rows.size());
  Tensor selected = x;
  if (m != x.dim(0)) {
    selected = p.alloc({m, x.dim(1), x.dim(2)});
    p.be.gather_rows(x, rows, selected);
  }
  return head_input(p, selected, hc, norm, scope);
}

void Transformer::full_head(Pass& p, const Tensor& y, const WeightView& head_w, std::vector<float>& host) const {
  const int64_t m = y.dim(0);
  host.resize(size_t(m * head_w.rows));
  Tensor logits = p.alloc({m, head_w.rows});
  p.be.linear(y, head_w, logits, {ActQuant::None, /*round_bf16=*/false});
  p.be.to_host(logits, host.data());
}

void Transformer::set_argmax_head(const ArgmaxHead& head, int64_t max_candidates) {
  argmax_head_ = head;
  argmax_max_candidates_ = max_candidates;
}

void Transformer::begin_pass(Pass& p, std::span<const Request> requests, std::vector<int64_t>& rows_begin,
                             std::vector<int64_t>& logits_begin, std::vector<int64_t>& logit_rows,
                             std::vector<int64_t>& kept) const {
  logit_rows.clear();
  p.add_requests(requests, config_.vocab_size, config_.max_position_embeddings, rows_begin, logits_begin, logit_rows);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].prompt) continue;
    DSV4_CHECK(p.prompt_rows == rows_begin[i], "forward: prompt requests must come before the others");
    p.prompt_rows += int64_t(requests[i].tokens.size());
  }
  // The rows whose streams leave the last block: every row of a request that reads them, the
  // logit rows of the others (the rest only extend the last block's caches). Each request's
  // rows_begin becomes its first row among them.
  kept.clear();
  for (size_t i = 0; i < requests.size(); ++i) {
    const int64_t begin = rows_begin[i], end = begin + int64_t(requests[i].tokens.size());
    const int64_t first_logit = logits_begin[i];
    const int64_t end_logit = i + 1 < requests.size() ? logits_begin[i + 1] : int64_t(logit_rows.size());
    rows_begin[i] = int64_t(kept.size());
    if (requests[i].streams) {
      const int64_t from = begin + std::clamp<int64_t>(requests[i].streams_from, 0, end - begin);
      for (int64_t l = first_logit; l < end_logit && logit_rows[size_t(l)] < from; ++l) kept.push_back(logit_rows[size_t(l)]);
      for (int64_t r = from; r < end; ++r) kept.push_back(r);
    } else
      kept.insert(kept.end(), logit_rows.begin() + first_logit, logit_rows.begin() + end_logit);
  }
}

void Transformer::run_layers(Pass& p, Tensor& x, int64_t begin, int64_t end, std::span<const int64_t> kept,
                             std::span<Tensor> tapped) {
  const int64_t n = x.dim(0), hc = config_.hc_mult, D = config_.hidden_size, k = int64_t(kept.size());
  // Each block's output is copied into the other of two stream buffers and its intermediates
  // are freed, so the pass's scratch memory is one block's, whatever the depth.
  Tensor spare = p.alloc({n, hc, D});
  std::vector<int64_t>& every_row = identity_rows_;
  for (int64_t i = int64_t(every_row.size()); i < n; ++i) every_row.push_back(i);
  size_t t = 0;
  while (t < taps_.size() && taps_[t] < begin) ++t;
  const Workspace::Mark layers_begin = workspace_.mark();
  for (int64_t l = begin; l < end; ++l) {
    const bool last = l + 1 == int64_t(blocks_.size());
    const Tensor y = last && k < n ? blocks_[size_t(l)].forward(p, x, kept) : blocks_[size_t(l)].forward(p, x);
    if (t < taps_.size() && taps_[t] == l) {
      Tensor rows = y;
      if (y.dim(0) != k) {
        rows = p.alloc({k, hc, D});
        p.be.gather_rows(y, kept, rows);
      }
      p.be.stream_mean(rows, tapped[t++]);
    }
    spare.shape[0] = y.dim(0);
    if (y.dim(0) > 0) p.be.gather_rows(y, std::span<const int64_t>(every_row).first(size_t(y.dim(0))), spare);
    workspace_.rewind(layers_begin);
    std::swap(x, spare);
  }
}

void Transformer::forward(std::span<const Request> requests, Output& out, Tracer* tracer) {
  DSV4_CHECK(!requests.empty(), "forward: no requests");
  if (link_ && link_->stages() > 1) {
    DSV4_CHECK(!tracer, "forward: a traced pass runs in one process (this one holds layers [0, ",
               link_->first_layer(1), ") of ", blocks_.size(), ")");
    forward_staged(requests, out);
    return;
  }
  workspace_.reset();
  Pass p{backend_, workspace_, tracer};
  std::vector<int64_t> logit_rows;
  std::vector<int64_t>& kept = kept_rows_;
  begin_pass(p, requests, out.rows_begin, out.logits_begin, logit_rows, kept);
  const int64_t n = p.rows(), hc = config_.hc_mult, D = config_.hidden_size, k = int64_t(kept.size());
  PromptRowsScope prompt_scope(backend_, p.prompt_rows);
  Tensor x = p.alloc({n, hc, D});
  p.be.embed(weights_.embed, p.tokens, hc, x);
  last_block_rows_ += k;
  std::vector<Tensor> tapped;  // the mean streams of each tapped block, for the kept rows
  for (size_t t = 0; t < taps_.size(); ++t) tapped.push_back(p.alloc({k, D}));
  run_layers(p, x, 0, int64_t(blocks_.size()), kept, tapped);
  prompt_scope.end();  // the head's rows are gathered: no longer a prefix
  // Only the rows whose logits are wanted go through the head (their places among the kept rows).
  if (k < n)
    for (int64_t& r : logit_rows) r = std::lower_bound(kept.begin(), kept.end(), r) - kept.begin();
  finish_pass(p, requests, x, logit_rows, tapped, out);
  p.commit_sequences();
}

void Transformer::finish_pass(Pass& p, std::span<const Request> requests, const Tensor& x,
                              std::span<const int64_t> logit_rows, std::span<const Tensor> tapped, Output& out) {
  const int64_t hc = config_.hc_mult, D = config_.hidden_size;
  out.vocab = config_.vocab_size;
  out.hidden_width = hc * D;
  // Rows that only want their argmax may take the bounded head (model/argmax_head.h) — up to
  // kBoundedHeadRows of them: the copy's 4-bit kernels do ~4 multiply-adds per byte and row where
  // the BF16 head's do 0.5, so from 3 rows on (a verification of k ≥ 2 drafts) reading half the
  // bytes no longer pays for the arithmetic on two cores (spec k = 2 / 3: 24.5 tok/s against
  // 29.0 / 28.3 with the full head).
  constexpr size_t kBoundedHeadRows = 2;
  bool argmax_only =
      argmax_head_.enabled() && !logit_rows.empty() && logit_rows.size() <= kBoundedHeadRows && !p.tracing();
  for (const Request& r : requests) argmax_only = argmax_only && (r.no_logits || r.argmax_only);
  if (argmax_only) {
    const Tensor y = head_input_rows(p, x, logit_rows, weights_.hc_head, weights_.norm, "head");
    if (!bounded_argmax_logits(p, y, argmax_head_, weights_.head, config_.vocab_size, argmax_max_candidates_,
                               out.logits, argmax_scratch_, argmax_counts_))
      full_head(p, y, weights_.head, out.logits);
  } else {
    head_rows(p, x, logit_rows, weights_.hc_head, weights_.norm, weights_.head, out.logits, "head");
  }
  out.hidden = x;  // (the workspace keeps it until the next pass)
  out.taps = Tensor();
  if (!taps_.empty()) {
    out.taps = p.alloc({x.dim(0), int64_t(taps_.size()) * D});
    p.be.concat_cols(tapped, out.taps);
  }
  out.backend = &backend_;
}

}  // namespace dsv4
