// Choosing a draft token from a drafter's logits the way the target chooses its own: the argmax
// (greedy) or a draw from the request's sampling distribution, among the tokens its mask allows
// after the context and the drafts before. Shared by the proposers.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "speculative/proposer.h"

namespace dsv4 {

class DraftChooser {
 public:
  explicit DraftChooser(int64_t target_vocab) : target_vocab_(target_vocab) {}

  // `logits` covers the drafter's vocabulary (its first rows, possibly fewer than the target's).
  // Returns false when the mask allows none of those tokens. In sampling mode `probs` (if given)
  // gets the draft distribution q over the whole target vocabulary (0 beyond the drafter's).
  bool choose(std::span<const float> logits, const DraftRequest& req, std::span<const int32_t> drafted,
              int32_t& token, std::vector<float>* probs);

 private:
  int64_t target_vocab_;
  std::vector<uint64_t> allowed_;
  std::vector<int32_t> context_;
  std::vector<float> probs_;
};

}  // namespace dsv4
