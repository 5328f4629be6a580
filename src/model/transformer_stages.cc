// Transformer::forward across pipeline stages (model/stage_link.h): stage 0's side, which splits a
// pass into micro-batches and runs the head, and a later stage's part of each micro-batch.
#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "model/transformer.h"

namespace dsv4 {

namespace {

// Requests [first, first + count) of a pass: whole sequences, in order (prompts stay first).
struct MicroBatch {
  size_t first = 0, count = 0;
  std::vector<int64_t> rows_begin, logits_begin, logit_rows, kept;
};

// A pass cut in m micro-batches keeps m stages at work at once, but each micro-batch reads its
// layers' weights again: a pass of few rows is bound by those reads (a decode step), and cut in m it
// takes 2m - 1 stage times instead of m. So a pass is cut only where every micro-batch has
// kMinRowsPerMicroBatch rows or more (prompt chunks, many sequences with drafts), into at most one
// per stage and per request, where the rows before reach an equal share. (Measured on a V4-Flash
// checkpoint, 4 sequences decoding over 2 stages: cut, 0.6x of uncut; docs/distributed.md.)
constexpr int64_t kMinRowsPerMicroBatch = 64;

std::vector<MicroBatch> micro_batches(std::span<const Transformer::Request> requests, int stages) {
  int64_t rows = 0;
  for (const auto& r : requests) rows += int64_t(r.tokens.size());
  const size_t m = size_t(std::clamp<int64_t>(rows / kMinRowsPerMicroBatch, 1,
                                              std::min<int64_t>(int64_t(requests.size()), std::max(stages, 1))));
  std::vector<MicroBatch> out;
  auto cut = [&](size_t first, size_t count) {
    out.emplace_back();
    out.back().first = first;
    out.back().count = count;
  };
  int64_t seen = 0;
  size_t first = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    seen += int64_t(requests[i].tokens.size());
    const size_t left = requests.size() - i - 1, batches_left = m - out.size() - 1;
    // Cut after request i where its share is reached, or where every later request needs a batch.
    if (out.size() + 1 < m && (seen * int64_t(m) >= rows * int64_t(out.size() + 1) || left == batches_left)) {
      cut(first, i + 1 - first);
      first = i + 1;
    }
  }
  cut(first, requests.size() - first);
  return out;
}

StageRequest stage_request(const Transformer::Request& r) {
  DSV4_CHECK(r.sequence && r.sequence->journal_id() > 0, "pipeline stages: a request's cache was not made by this "
             "model's new_sequence()");
  return {r.sequence->journal_id(), std::vector<int32_t>(r.tokens.begin(), r.tokens.end()), r.all_logits, r.no_logits,
          r.prompt, r.streams, r.streams_from};
}

}  // namespace

void Transformer::forward_staged(std::span<const Request> requests, Output& out) {
  const int64_t hc = config_.hc_mult, D = config_.hidden_size, width = hc * D, T = int64_t(taps_.size());
  const int64_t local_end = link_->first_layer(1);
  std::vector<MicroBatch> batches = micro_batches(requests, link_->stages());
  const int64_t pass = ++staged_passes_;
  StageStats& stats = link_->stats();
  if (batches.size() > 1) ++stats.split_passes;
  auto since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Stage 0's layers for each micro-batch, sent on as soon as they are done.
  for (size_t b = 0; b < batches.size(); ++b) {
    MicroBatch& mb = batches[b];
    const std::span<const Request> part = requests.subspan(mb.first, mb.count);
    const auto t0 = std::chrono::steady_clock::now();
    workspace_.reset();
    Pass p{backend_, workspace_};
    begin_pass(p, part, mb.rows_begin, mb.logits_begin, mb.logit_rows, mb.kept);
    const int64_t n = p.rows(), k = int64_t(mb.kept.size());
    StageHeader h;
    h.pass = pass;
    h.micro_batch = int64_t(b);
    if (b == 0) h.ops = link_->journal()->take();  // (the caches' changes since the last pass)
    for (const Request& r : part) h.requests.push_back(stage_request(r));
    StageMessage m;
    m.header = encode_stage_header(h);
    {
      PromptRowsScope prompt_scope(backend_, p.prompt_rows);
      Tensor x = p.alloc({n, hc, D});
      p.be.embed(weights_.embed, p.tokens, hc, x);
      std::vector<Tensor> tapped;
      for (int64_t t = 0; t < T; ++t) tapped.push_back(p.alloc({k, D}));
      run_layers(p, x, 0, local_end, mb.kept, tapped);
      m.streams.resize(size_t(n * width));
      p.be.to_host(x, m.streams.data());
      m.taps.assign(size_t(T * k * D), 0.0f);
      for (int64_t t = 0; t < T && taps_[size_t(t)] < local_end; ++t)
        if (k > 0) p.be.to_host(tapped[size_t(t)], m.taps.data() + t * k * D);
    }
    p.commit_sequences();
    ++stats.passes;
    stats.rows += n;
    stats.compute_seconds += since(t0);
    link_->send_next(std::move(m));
  }
  // The last stage's output for each, in order: the kept rows' final streams and every tap.
  std::vector<float> streams, taps;
  std::vector<std::vector<float>> tap_parts(static_cast<size_t>(T));
  int64_t K = 0;
  out.rows_begin.clear();
  out.logits_begin.clear();
  std::vector<int64_t> logit_rows;
  for (size_t b = 0; b < batches.size(); ++b) {
    MicroBatch& mb = batches[b];
    StageMessage m = link_->receive_previous();
    const StageHeader h = decode_stage_header(m.header);
    const int64_t k = int64_t(mb.kept.size());
    DSV4_CHECK(h.kind == StageHeader::Pass && h.pass == pass && h.micro_batch == int64_t(b) &&
                   int64_t(m.streams.size()) == k * width && int64_t(m.taps.size()) == T * k * D,
               "pipeline stages: pass ", pass, " micro-batch ", b, " came back as pass ", h.pass, " micro-batch ",
               h.micro_batch, " with ", m.streams.size(), " stream values (expected ", k * width, ")");
    streams.insert(streams.end(), m.streams.begin(), m.streams.end());
    for (int64_t t = 0; t < T; ++t)
      tap_parts[size_t(t)].insert(tap_parts[size_t(t)].end(), m.taps.begin() + t * k * D, m.taps.begin() + (t + 1) * k * D);
    const int64_t logits_before = int64_t(logit_rows.size());
    for (size_t i = 0; i < mb.count; ++i) {
      out.rows_begin.push_back(K + mb.rows_begin[i]);
      out.logits_begin.push_back(logits_before + mb.logits_begin[i]);
    }
    // (The logit rows' places among the micro-batch's kept rows, then among all of them.)
    for (int64_t r : mb.logit_rows)
      logit_rows.push_back(K + (std::lower_bound(mb.kept.begin(), mb.kept.end(), r) - mb.kept.begin()));
    K += k;
  }
  last_block_rows_ += K;
  const auto t0 = std::chrono::steady_clock::now();
  workspace_.reset();
  Pass p{backend_, workspace_};
  Tensor x = p.alloc({K, hc, D});
  if (K > 0) p.be.from_host(x, streams.data());
  std::vector<Tensor> tapped;
  for (int64_t t = 0; t < T; ++t) {
    tapped.push_back(p.alloc({K, D}));
    if (K > 0) p.be.from_host(tapped.back(), tap_parts[size_t(t)].data());
  }
  finish_pass(p, requests, x, logit_rows, tapped, out);
  stats.compute_seconds += since(t0);
}

void Transformer::forward_stage(StageMessage& m, const StageHeader& h, const CacheMirror& mirror) {
  DSV4_CHECK(link_ && link_->stage() > 0, "forward_stage: not a later pipeline stage");
  const int s = link_->stage();
  const int64_t begin = link_->first_layer(s), end = link_->first_layer(s + 1);
  const int64_t hc = config_.hc_mult, D = config_.hidden_size, width = hc * D, T = int64_t(taps_.size());
  std::vector<Request> requests;
  for (const StageRequest& r : h.requests) {
    Request q;
    q.sequence = &mirror.get(r.sequence);
    q.tokens = r.tokens;
    q.all_logits = r.all_logits;
    q.no_logits = r.no_logits;
    q.prompt = r.prompt;
    q.streams = r.streams;
    q.streams_from = r.streams_from;
    requests.push_back(q);
  }
  workspace_.reset();
  Pass p{backend_, workspace_};
  std::vector<int64_t> rows_begin, logits_begin, logit_rows, kept;
  begin_pass(p, requests, rows_begin, logits_begin, logit_rows, kept);
  const int64_t n = p.rows(), k = int64_t(kept.size());
  DSV4_CHECK(int64_t(m.streams.size()) == n * width && int64_t(m.taps.size()) == T * k * D, "pipeline stage ", s,
             ": pass ", h.pass, " brings ", m.streams.size(), " stream values for ", n, " rows of width ", width);
  {
    PromptRowsScope prompt_scope(backend_, p.prompt_rows);
    Tensor x = p.alloc({n, hc, D});
    if (n > 0) p.be.from_host(x, m.streams.data());
    std::vector<Tensor> tapped;
    for (int64_t t = 0; t < T; ++t) tapped.push_back(p.alloc({k, D}));
    run_layers(p, x, begin, end, kept, tapped);
    m.streams.resize(size_t(x.dim(0) * width));
    if (x.dim(0) > 0) p.be.to_host(x, m.streams.data());
    for (int64_t t = 0; t < T; ++t)
      if (taps_[size_t(t)] >= begin && taps_[size_t(t)] < end && k > 0)
        p.be.to_host(tapped[size_t(t)], m.taps.data() + t * k * D);
  }
  p.commit_sequences();
}

}  // namespace dsv4
