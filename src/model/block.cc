#include "model/block.h"

namespace dsv4 {

Block::Block(const BlockWeights& w, const ModelConfig& c, std::string scope, size_t cache_layer)
    : w_(w), eps_(float(c.rms_norm_eps)), scope_(std::move(scope)), cache_layer_(cache_layer),
      hc_attn_(w.hc_attn, c, "hc_attn"), hc_ffn_(w.hc_ffn, c, "hc_ffn"),
      attention_(w.attn, c, w.compress_ratio), moe_(w.ffn, c, w.hash_routed) {}

Tensor Block::forward(Pass& p, const Tensor& x) const {
  p.trace(scope_, "in", x);

  auto mix = hc_attn_.pre(p, x, scope_);
  Tensor h = p.alloc({x.dim(0), x.dim(2)});
  p.be.rms_norm(mix.u, w_.attn_norm, eps_, h);
  p.trace(scope_, "attn_in", h);
  Tensor attn = attention_.forward(p, h, cache_layer_, scope_);
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
