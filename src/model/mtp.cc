#include "model/mtp.h"

#include "core/error.h"

namespace dsv4 {

MtpModule::MtpModule(const Transformer& target, const MtpWeights& weights, MtpOptions options)
    : target_(target), c_(target.config()), w_(weights), options_(options), workspace_(target.backend()),
      pools_(target.backend()), geometry_{cache_geometry_for(c_, 0)}, block_(weights.block, c_, "mtp", 0),
      head_view_(target.weights().head) {
  DSV4_CHECK(weights.block.compress_ratio == 0, "MTP block must be window-only (compress ratio 0)");
  if (options_.head) {  // a copy of the head's first rows (DraftHead): same columns, no more rows
    DSV4_CHECK(options_.head->cols == head_view_.cols && options_.head->rows <= head_view_.rows &&
                   (options_.vocab_limit == 0 || options_.head->rows == options_.vocab_limit),
               "mtp draft head '", options_.head->name(), "' [", options_.head->rows, ", ", options_.head->cols,
               "] does not fit the head [", head_view_.rows, ", ", head_view_.cols, "] (vocab limit ",
               options_.vocab_limit, ")");
    head_view_ = *options_.head;
  } else if (options_.vocab_limit > 0) {
    DSV4_CHECK(options_.vocab_limit <= head_view_.rows, "mtp vocab limit ", options_.vocab_limit,
               " exceeds the vocabulary (", head_view_.rows, ")");
    head_view_.rows = options_.vocab_limit;  // rows are contiguous: a prefix of the same mapping
  }
}

std::unique_ptr<SequenceCache> MtpModule::new_sequence() {
  return std::make_unique<SequenceCache>(pools_, geometry_, options_.max_rollback);
}

Tensor MtpModule::combine(Pass& p, const Tensor& streams) const {
  const int64_t n = streams.dim(0), hc = streams.dim(1), D = streams.dim(2);
  const float eps = float(c_.rms_norm_eps);
  Tensor e = p.alloc({n, D});
  p.be.embed(target_.weights().embed, p.tokens, 1, e);
  p.be.rms_norm(e, w_.enorm, eps, e);
  p.trace("mtp", "e", e);
  Tensor h = p.alloc({n, hc, D});
  p.be.rms_norm(streams, w_.hnorm, eps, h);  // per stream
  p.trace("mtp", "h", h);
  Tensor e_proj = p.alloc({n, D});
  p.be.linear(e, w_.e_proj, e_proj);
  Tensor h_proj = p.alloc({n, hc, D});
  p.be.linear(h, w_.h_proj, h_proj);
  Tensor x = p.alloc({n, hc, D});
  p.be.add(h_proj, e_proj, x);  // e_proj broadcast to every stream
  p.trace("mtp", "x_in", x);
  return x;
}

std::vector<float> MtpModule::Output::streams_host() const {
  std::vector<float> host(size_t(streams.numel()));
  if (!host.empty()) backend->to_host(streams, host.data());
  return host;
}

void MtpModule::forward(std::span<const Request> requests, Output& out, Tracer* tracer) {
  DSV4_CHECK(!requests.empty(), "mtp forward: no requests");
  workspace_.reset();
  Pass p(target_.backend(), workspace_, tracer);
  const int64_t hc = c_.hc_mult, D = c_.hidden_size, width = hc * D;
  std::vector<int64_t> logit_rows, rows_begin;
  for (const Request& r : requests)
    DSV4_CHECK((r.host_streams != nullptr) != (r.stream_rows != nullptr),
               "mtp forward: a request needs its input streams from the host or from a table (one of them)");
  p.add_requests(requests, c_.vocab_size, c_.max_position_embeddings, rows_begin, out.logits_begin, logit_rows);
  const int64_t n = p.rows();

  // The input rows: tables' rows in one load, host rows uploaded per request.
  Tensor streams = p.alloc({n, hc, D});
  std::vector<const RowTable*> tables;
  std::vector<int64_t> table_rows;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    const int64_t m = int64_t(r.tokens.size());
    if (r.host_streams) {
      Tensor part = streams.slice(rows_begin[i], rows_begin[i] + m);
      p.be.from_host(part, r.host_streams);
      continue;
    }
    for (int64_t j = 0; j < m; ++j) {
      tables.push_back(r.stream_rows);
      table_rows.push_back(p.positions[size_t(rows_begin[i] + j)]);
    }
  }
  if (int64_t(tables.size()) == n) {
    Tensor flat = streams.reshape({n, width});
    p.be.load_rows(tables, table_rows, flat);
  } else {
    for (size_t i = 0, t = 0; i < requests.size(); ++i) {
      if (!requests[i].stream_rows) continue;
      const int64_t m = int64_t(requests[i].tokens.size());
      Tensor part = streams.slice(rows_begin[i], rows_begin[i] + m).reshape({m, width});
      p.be.load_rows(std::span(tables).subspan(t, size_t(m)), std::span(table_rows).subspan(t, size_t(m)), part);
      t += size_t(m);
    }
  }
  // Rows whose logits are not asked for only extend the cache: the block's output part (attention
  // output, MoE) runs for the logit rows alone, except in a traced pass, which records every row.
  const int64_t m = int64_t(logit_rows.size());
  const bool every_row = p.tracing();
  const Tensor in = combine(p, streams);
  Tensor x = every_row ? block_.forward(p, in) : block_.forward(p, in, logit_rows);
  counts_.rows += n;
  counts_.output_rows += x.dim(0);
  std::vector<int64_t> rows_of_x = logit_rows;  // the logit rows' rows in x
  if (!every_row)
    for (int64_t i = 0; i < m; ++i) rows_of_x[size_t(i)] = i;

  out.vocab = head_view_.rows;
  out.hidden_width = width;
  HeadRescore rescore;
  if (options_.head) rescore = {&target_.weights().head, options_.rescore, &rescore_scratch_};
  target_.head_rows(p, x, rows_of_x, w_.hc_head, w_.norm, head_view_, out.logits, "mtp", rescore);
  if (x.dim(0) != m) {  // (traced) keep the logit rows' streams only
    Tensor picked = p.alloc({m, hc, D});
    p.be.gather_rows(x, logit_rows, picked);
    x = picked;
  }
  out.streams = x;  // (the workspace keeps it until the next pass)
  out.backend = &p.be;
  p.commit_sequences();
}

}  // namespace dsv4
