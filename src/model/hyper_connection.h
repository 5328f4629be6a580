// Hyper-connections (spec §3): every position carries hc residual streams. hc_pre mixes
// them into the single input of a sub-layer (weights `pre`, and `post`/`comb` for the
// way back, the latter Sinkhorn-normalised); hc_post writes the sub-layer's output back
// into the streams; hc_head reduces the streams before the final norm.
#pragma once
#include <string>

#include "model/pass.h"
#include "model/weights.h"

namespace dsv4 {

class HyperConnection {
 public:
  HyperConnection(const HcWeights& w, const ModelConfig& c, std::string site)  // site: "hc_attn" | "hc_ffn"
      : w_(w), iters_(c.hc_sinkhorn_iters), hc_eps_(float(c.hc_eps)), norm_eps_(float(c.rms_norm_eps)),
        site_(std::move(site)) {}

  // u = Σ_j pre_j·X_j (bf16), with post and comb kept for post().
  Backend::HcPreOut pre(Pass& p, const Tensor& x, const std::string& scope) const {
    const int64_t n = x.dim(0), hc = x.dim(1), D = x.dim(2);
    Backend::HcPreOut out;
    out.u = p.alloc({n, D});
    out.post = p.alloc({n, hc});
    out.comb = p.alloc({n, hc, hc});
    if (p.tracing()) {
      out.mixes = p.alloc({n, (2 + hc) * hc});
      out.pre = p.alloc({n, hc});
    }
    p.be.hc_pre(x, w_, iters_, hc_eps_, norm_eps_, out);
    if (p.tracing()) {
      p.trace(scope, site_ + ".mixes", out.mixes);
      p.trace(scope, site_ + ".pre", out.pre);
      p.trace(scope, site_ + ".post", out.post);
      p.trace(scope, site_ + ".comb", out.comb);
      p.trace(scope, site_ + ".u", out.u);
    }
    return out;
  }

  // X'_k = post_k·f + Σ_j comb_jk·X_j (bf16)
  Tensor post(Pass& p, const Tensor& x, const Tensor& f, const Backend::HcPreOut& mix) const {
    Tensor y = p.alloc({x.dim(0), x.dim(1), x.dim(2)});
    p.be.hc_post(x, f, mix.post, mix.comb, y);
    return y;
  }

 private:
  const HcWeights& w_;
  int64_t iters_;
  float hc_eps_, norm_eps_;
  std::string site_;
};

}  // namespace dsv4
