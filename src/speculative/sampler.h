// Turning logits into tokens: greedy (temperature 0) or sampling with temperature,
// top-k and top-p, optionally restricted to the tokens a mask allows.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace dsv4 {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no limit
  float top_p = 1.0f;        // 1 = no nucleus cut
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

// Highest logit among allowed tokens (allowed: a TokenMask bitmap, or empty = all); ties take
// the lowest id.
int32_t argmax_token(std::span<const float> logits, std::span<const uint64_t> allowed = {});

// The distribution sampling draws from: softmax(logits / T) over the allowed tokens, cut
// to the top-k and then to the smallest set with mass >= top_p, renormalised. Greedy: the
// one-hot of argmax_token. `probs` gets one entry per logit.
void sampling_distribution(std::span<const float> logits, const SamplingParams& params,
                           std::span<const uint64_t> allowed, std::vector<float>& probs);

// Draws a token from probs (which sum to ~1) using one uniform from rng.
int32_t sample_from(std::span<const float> probs, std::mt19937_64& rng);

// Uniform in [0, 1).
double uniform01(std::mt19937_64& rng);

}  // namespace dsv4
