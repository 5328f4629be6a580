// Random weights with the statistics of the golden tiny-a checkpoint, scaled with the
// layer widths so that a model of any size keeps well-conditioned activations: input
// projections std 1/sqrt(fan_in), output projections 0.15/sqrt(fan_in), routed experts
// 0.06 (w1, w3) and 0.014 (w2) times sqrt(256/fan_in), embed std 1, head 4/sqrt(D)
// (logit std ~4 for unit-RMS inputs), norms 1 + N(0, 0.1), hyper-connection and router
// parameters as measured on tiny-a; a DSpark drafter's Markov head W1 std 1, W2 4/sqrt(rank)
// and confidence head 1/sqrt(fan_in), as measured on tiny-dspark-a.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/weight_jobs.h"
#include "io/config.h"

namespace dsv4 {

struct ValueDistribution {
  enum Kind { Normal, Uniform, Constant } kind = Constant;
  float a = 0.0f, b = 0.0f;  // Normal: mean a, std b; Uniform: [a, b); Constant: a

  static ValueDistribution normal(float mean, float std) { return {Normal, mean, std}; }
  static ValueDistribution uniform(float lo, float hi) { return {Uniform, lo, hi}; }
  static ValueDistribution constant(float v) { return {Constant, v, 0.0f}; }
};

// The distribution of a tensor of the random preset, chosen by its name; throws for a
// name it does not know (so that a new table entry cannot silently get arbitrary values).
ValueDistribution random_distribution(const WeightJob& job, const ModelConfig& config);

// A fill drawing every value of a `cols`-wide job from `d`.
FillValues fill_from(ValueDistribution d, int64_t cols);

// tid2eid: for every token, `per_token` distinct random experts of n_experts.
FillInts random_expert_ids(int64_t n_experts, int64_t per_token);

// The jobs of a random checkpoint.
std::vector<WeightJob> random_weight_jobs(const ModelConfig& config, bool with_mtp);

}  // namespace dsv4
