#include "speculative/draft_choice.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {

bool DraftChooser::choose(std::span<const float> logits, const DraftRequest& req, std::span<const int32_t> drafted,
                          int32_t& token, std::vector<float>* probs) {
  const SamplingParams greedy;
  const SamplingParams& sampling = req.sampling ? *req.sampling : greedy;
  std::span<const uint64_t> allowed;
  if (req.mask) {
    allowed_.resize(mask_words(size_t(target_vocab_)));
    context_.assign(req.context.begin(), req.context.end());
    context_.insert(context_.end(), drafted.begin(), drafted.end());
    req.mask->allowed_tokens(req.mask_sequence, context_, allowed_);
    if (count_allowed(allowed_, logits.size()) == 0) return false;  // nothing the drafter can say
    allowed = allowed_;
  }
  if (sampling.greedy()) {
    token = argmax_token(logits, allowed);
    return true;
  }
  sampling_distribution(logits, sampling, allowed, probs_);
  DSV4_CHECK(req.rng, "draft: sampling without a random generator");
  token = sample_from(probs_, *req.rng);
  if (probs) {
    probs->assign(size_t(target_vocab_), 0.0f);  // q over the full vocabulary (0 beyond the drafter's)
    std::copy(probs_.begin(), probs_.end(), probs->begin());
  }
  return true;
}

}  // namespace dsv4
