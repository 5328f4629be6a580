#include "model/block.h"

#include "core/error.h"

namespace dsv4 {

Block::Block(const BlockWeights& w, const ModelConfig& c, std::string scope, size_t cache_layer, int64_t draft_block)
    : w_(w), eps_(float(c.rms_norm_eps)), scope_(std::move(scope)), cache_layer_(cache_layer),
      hc_attn_(w.hc_attn, c, "hc_attn"), hc_ffn_(w.hc_ffn, c, "hc_ffn"),
      attention_(w.attn, c, w.compress_ratio, draft_block), moe_(w.ffn, c, w.hash_routed) {}

Tensor Block::forward(Pass& p, const Tensor& x) const {
  AttnInput in = extend_caches(p, x);
  return output(p, x, in.h, in.mix);
}

Block::AttnInput Block::extend_caches(Pass& p, const Tensor& x) const {
  p.trace(scope_, "in", x);
  AttnInput in{hc_attn_.pre(p, x, scope_), p.alloc({x.dim(0), x.dim(2)})};
  p.be.rms_norm(in.mix.u, w_.attn_norm, eps_, in.h);
  p.trace(scope_, "attn_in", in.h);
  attention_.extend_caches(p, in.h, cache_layer_, scope_);  // every row: later rows attend to it
  return in;
}

Tensor Block::forward(Pass& p, const Tensor& x, std::span<const int64_t> outputs) const {
  const int64_t n = x.dim(0), kept = int64_t(outputs.size());
  for (int64_t i = 0; i < kept; ++i)
    DSV4_CHECK(outputs[size_t(i)] >= (i ? outputs[size_t(i - 1)] + 1 : 0) && outputs[size_t(i)] < n, scope_,
               ": output rows must be ascending rows of the ", n, " in the pass");
  AttnInput in = extend_caches(p, x);
  if (kept == n) return output(p, x, in.h, in.mix);
  if (kept == 0) {  // (a zero-row view)
    Tensor none = x;
    none.shape[0] = 0;
    return none;
  }

  // The rest only for the rows whose outputs are read.
  auto gather = [&](const Tensor& t) {  // t's rows `outputs`, same shape otherwise (f32)
    Tensor g = p.alloc({kept, t.numel() / n});
    p.be.gather_rows(t, outputs, g);
    g.shape = t.shape;
    g.shape[0] = kept;
    g.ndim = t.ndim;
    return g;
  };
  Pass subset = p.subset(outputs);
  in.mix.post = gather(in.mix.post);
  in.mix.comb = gather(in.mix.comb);
  Tensor hs = gather(in.h);
  PromptRowsScope prompt(p.be, subset.prompt_rows, p.prompt_rows);
  return output(subset, gather(x), hs, in.mix);
}

Tensor Block::output(Pass& p, const Tensor& x, Tensor& h, Backend::HcPreOut& mix) const {
  Tensor attn = attention_.output(p, h, cache_layer_, scope_);
  Tensor y = hc_attn_.post(p, x, attn, mix);
  p.trace(scope_, "hc_attn_out", y);

  mix = hc_ffn_.pre(p, y, scope_);
  p.be.rms_norm(mix.u, w_.ffn_norm, eps_, h);
  p.trace(scope_, "ffn_in", h);
  Tensor ffn = moe_.forward(p, h, scope_);
  p.trace(scope_, "moe_out", ffn);
  Tensor out = hc_ffn_.post(p, y, ffn, mix);
  p.trace(scope_, "out", out);
  return out;
}

}  // namespace dsv4
