// Draft proposers: anything that guesses the next few tokens cheaply for the target to
// verify in one pass. The MTP proposer is the first; the interface keeps the decoder
// independent of it.
//
// Protocol, for a sequence whose target has processed tokens x_0..x_{L-1} (streams
// X_0..X_{L-1}) and has chosen x_L:
//   propose(x_L, X_{L-1}, position L-1, k)  → d_1..d_k        (draft for positions L+1..L+k)
//   the target verifies [x_L, d_1..d_k] and accepts a of them
//   accept(a, X_L..X_{L+a-1}, d_1..d_a)                       (before the next propose)
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "speculative/sampler.h"
#include "speculative/token_mask.h"

namespace dsv4 {

// Per-sequence state of a proposer (its own caches); released when destroyed.
class ProposerState {
 public:
  virtual ~ProposerState() = default;
};

struct DraftRequest {
  ProposerState* state = nullptr;
  int32_t last_token = 0;                   // x_L: chosen, not yet processed by the target
  const float* target_stream = nullptr;     // X_{L-1}: the target's streams at `position`
  int64_t position = 0;                     // L - 1
  int num_drafts = 0;
  std::span<const int32_t> context;         // x_0..x_L (for the mask)
  const SamplingParams* sampling = nullptr; // the sequence's own sampling (greedy when null)
  const TokenMask* mask = nullptr;          // may be null
  size_t mask_sequence = 0;                 // passed to the mask
  std::mt19937_64* rng = nullptr;           // sampling mode: draws the drafts
  bool record_logits = false;               // keep the logits that chose each draft (tests)
};

struct Draft {
  std::vector<int32_t> tokens;              // d_1..d_k
  std::vector<std::vector<float>> probs;    // sampling mode: the distribution each d_j was drawn from
  std::vector<std::vector<float>> logits;   // with record_logits: the logits that chose d_j
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual std::unique_ptr<ProposerState> new_state() = 0;

  // Fills the state over prompt positions [first, first + n) from the target's streams
  // X_first..X_{first+n-1} of a prefill pass; `prompt` is the whole prompt x_0..x_{P-1}.
  // A long prompt is prefilled in chunks: called once per chunk, in order.
  virtual void prefill(ProposerState& state, std::span<const int32_t> prompt, int64_t first, int64_t n,
                       const float* target_streams) = 0;

  // Proposes drafts for several sequences at once (each with its own count, sampling and
  // mask). A draft may be shorter than asked when the mask leaves the proposer no token.
  virtual void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) = 0;

  // After verification: `accepted` drafts were kept; `target_streams` are the target's
  // streams X_L..X_{L+accepted-1} of the verify pass, `tokens` the accepted drafts.
  // Provisional state of rejected drafts is discarded.
  virtual void accept(ProposerState& state, int accepted, const float* target_streams,
                      std::span<const int32_t> tokens) = 0;
};

}  // namespace dsv4
