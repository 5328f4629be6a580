// The mixture-of-experts FFN (spec §3 "MoE"): sqrtsoftplus router with a selection bias
// (or hash routing by token id in the first layers), routed SwiGLU experts in FP4, and
// one shared expert in FP8.
#pragma once
#include <string>

#include "model/pass.h"
#include "model/weights.h"

namespace dsv4 {

class Moe {
 public:
  Moe(const MoeWeights& w, const ModelConfig& c, bool hash_routed);

  Tensor forward(Pass& p, const Tensor& x, const std::string& scope) const;

  // Components, exposed for tests:
  void route(Pass& p, const Tensor& x, Tensor& weights, Tensor& indices) const;  // [N, k] f32 / I32
  Tensor routed(Pass& p, const Tensor& x, const Tensor& weights, const Tensor& indices) const;  // fp32
  Tensor shared(Pass& p, const Tensor& x) const;                                              // bf16

 private:
  const MoeWeights& w_;
  int64_t top_k_;
  ScoringFunc func_;
  float route_scale_, swiglu_limit_;
  bool hash_routed_;
};

}  // namespace dsv4
