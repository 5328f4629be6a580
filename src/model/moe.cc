#include "model/moe.h"

namespace dsv4 {

Moe::Moe(const MoeWeights& w, const ModelConfig& c, bool hash_routed)
    : w_(w), top_k_(c.num_experts_per_tok), func_(c.scoring_func), route_scale_(float(c.routed_scaling_factor)),
      swiglu_limit_(float(c.swiglu_limit)), hash_routed_(hash_routed) {}

void Moe::route(Pass& p, const Tensor& x, Tensor& weights, Tensor& indices) const {
  const int64_t n = x.rows();
  Tensor logits = p.alloc({n, w_.gate.rows});
  p.be.linear(x, w_.gate, logits, {ActQuant::None, /*round_bf16=*/false});
  Backend::RouteParams params;
  params.top_k = top_k_;
  params.func = func_;
  params.route_scale = route_scale_;
  params.bias = hash_routed_ ? nullptr : &w_.bias;
  params.tid2eid = hash_routed_ ? &w_.tid2eid : nullptr;
  params.tokens = p.tokens;
  weights = p.alloc({n, top_k_});
  indices = p.alloc_i32({n, top_k_});
  p.be.moe_route(logits, params, weights, indices);
}

Tensor Moe::routed(Pass& p, const Tensor& x, const Tensor& weights, const Tensor& indices) const {
  Tensor out = p.alloc({x.rows(), x.cols()});
  p.be.moe_experts(x, weights, indices, w_.experts, swiglu_limit_, out);
  return out;
}

Tensor Moe::shared(Pass& p, const Tensor& x) const {
  const int64_t n = x.rows(), inter = w_.shared.w1.rows;
  Tensor g = p.alloc({n, inter}), u = p.alloc({n, inter});
  p.be.linear(x, w_.shared.w1, g);
  p.be.linear(x, w_.shared.w3, u);
  p.be.swiglu(g, u, swiglu_limit_, g);
  Tensor out = p.alloc({n, x.cols()});
  p.be.linear(g, w_.shared.w2, out);
  return out;
}

Tensor Moe::forward(Pass& p, const Tensor& x, const std::string& scope) const {
  Tensor weights, indices;
  route(p, x, weights, indices);
  p.trace(scope, "gate.weights", weights);
  p.trace(scope, "gate.indices", indices);
  Tensor r = routed(p, x, weights, indices);
  p.trace(scope, "moe_routed", r);
  Tensor s = shared(p, x);
  p.trace(scope, "moe_shared", s);
  Tensor out = p.alloc({x.rows(), x.cols()});
  p.be.add(r, s, out);  // bf16(routed + shared)
  return out;
}

}  // namespace dsv4
