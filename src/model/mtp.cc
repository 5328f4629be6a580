#include "model/mtp.h"

#include "core/error.h"

namespace dsv4 {

MtpModule::MtpModule(const Transformer& target, const MtpWeights& weights, MtpOptions options)
    : target_(target), c_(target.config()), w_(weights), options_(options), workspace_(target.backend()),
      pools_(target.backend()), geometry_{cache_geometry_for(c_, 0)}, block_(weights.block, c_, "mtp", 0),
      head_view_(target.weights().head) {
  DSV4_CHECK(weights.block.compress_ratio == 0, "MTP block must be window-only (compress ratio 0)");
  if (options_.vocab_limit > 0) {
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

void MtpModule::forward(std::span<const Request> requests, Output& out, Tracer* tracer) {
  DSV4_CHECK(!requests.empty(), "mtp forward: no requests");
  workspace_.reset();
  Pass p(target_.backend(), workspace_, tracer);
  const int64_t hc = c_.hc_mult, D = c_.hidden_size, width = hc * D;
  std::vector<int64_t> logit_rows;
  for (const Request& r : requests) DSV4_CHECK(r.streams, "mtp forward: request without input streams");
  p.add_requests(requests, c_.vocab_size, c_.max_position_embeddings, out.rows_begin, out.logits_begin, logit_rows);
  const int64_t n = p.rows();

  Tensor streams = p.alloc({n, hc, D});
  for (size_t i = 0; i < requests.size(); ++i) {
    Tensor part = streams.slice(out.rows_begin[i], out.rows_begin[i] + int64_t(requests[i].tokens.size()));
    p.be.from_host(part, requests[i].streams);
  }
  Tensor x = block_.forward(p, combine(p, streams));

  out.vocab = head_view_.rows;
  out.hidden_width = width;
  target_.head_rows(p, x, logit_rows, w_.hc_head, w_.norm, head_view_, out.logits, "mtp");
  out.streams.resize(size_t(n * width));
  p.be.to_host(x, out.streams.data());
  p.commit_sequences();
}

}  // namespace dsv4
