// Draft proposers: anything that guesses the next few tokens cheaply for the target to
// verify in one pass. The MTP proposer is the first; the interface keeps the decoder
// independent of it.
//
// Protocol, for a sequence whose target has processed tokens x_0..x_{L-1} (streams
// X_0..X_{L-1}) and has chosen x_L:
//   prefill(x_0..x_{P-1}, X of each chunk)                    (once per prompt chunk)
//   propose(x_0..x_L, k)                        → d_1..d_k    (draft for positions L+1..L+k)
//   the target verifies [x_L, d_1..d_k] and accepts a of them
//   accept(a, X_L..X_{L+a})                                   (after every verification)
// Each call covers every sequence of a target pass at once. The target's features (its streams
// after the last block, or the taps of chosen blocks: features()) are that pass's tensor in
// backend memory, valid during the call: a proposer keeps what it needs in its own backend
// memory, so nothing crosses to the host.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/state_file.h"
#include "core/tensor.h"
#include "speculative/sampler.h"
#include "speculative/token_mask.h"

namespace dsv4 {

// Per-sequence state of a proposer (its own caches); released when destroyed.
class ProposerState {
 public:
  virtual ~ProposerState() = default;
  virtual int64_t bytes_held() const { return 0; }  // of the blocks it holds
};

struct DraftRequest {
  ProposerState* state = nullptr;
  int64_t position = 0;                     // L - 1
  int num_drafts = 0;
  std::span<const int32_t> context;         // x_0..x_L: x_L chosen, not yet processed by the target
  const SamplingParams* sampling = nullptr; // the sequence's own sampling (greedy when null)
  const TokenMask* mask = nullptr;          // may be null
  size_t mask_sequence = 0;                 // passed to the mask
  std::mt19937_64* rng = nullptr;           // sampling mode: draws the drafts
  bool record_logits = false;               // keep the logits that chose each draft (tests)
};

// A chunk of a sequence's prompt in a target pass: positions [first, first + n); `prompt` is
// every token known so far, x_0..x_{P-1} (P ≥ first + n). The pass has the features of positions
// [from, first + n) only, at rows [row, row + first + n - from) (from ≥ first: the rows before
// the proposer's prompt_features_from(P) got none). A finished sequence continued with more
// tokens is prefilled the same way, from where its state ends.
struct PrefillChunk {
  ProposerState* state = nullptr;
  std::span<const int32_t> prompt;
  int64_t first = 0, n = 0;
  int64_t row = 0;
  int64_t from = 0;
  // The sequence may not draft for a while (`--draft auto`): a proposer may leave the work its
  // first draft needs until that draft (the MTP's rows: at most a window of them).
  bool defer = false;
};

// A sequence's verification in a target pass: `accepted` drafts were kept (0 when it had no
// proposal in this step); the streams X_L..X_{L+accepted} are rows [row, row + accepted].
struct Verified {
  ProposerState* state = nullptr;
  int accepted = 0;
  int64_t row = 0;
};

struct Draft {
  std::vector<int32_t> tokens;              // d_1..d_k
  std::vector<std::vector<float>> probs;    // sampling mode: the distribution each d_j was drawn from
  std::vector<std::vector<float>> logits;   // with record_logits: the logits that chose d_j
  // The proposer's own estimate, per draft, that d_j is accepted when d_1..d_{j-1} are (DSpark's
  // confidence head); empty when it has none. The decoder may verify a prefix only.
  std::vector<float> survival;
  // Keeps the first n drafts.
  void truncate(size_t n) {
    if (tokens.size() > n) tokens.resize(n);
    if (probs.size() > n) probs.resize(n);
    if (logits.size() > n) logits.resize(n);
    if (survival.size() > n) survival.resize(n);
  }
};

// What a proposer reads of each target pass (the tensor prefill() and accept() receive):
//   Streams  [rows, hc, D]: the streams after the last block (the MTP module)
//   Taps     [rows, taps·D]: the mean streams after each tapped block, side by side (DSpark;
//            Transformer::set_taps)
enum class TargetFeatures { Streams, Taps };

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  virtual std::unique_ptr<ProposerState> new_state() = 0;
  virtual TargetFeatures features() const { return TargetFeatures::Streams; }
  // The most drafts one propose() makes per sequence (0: no limit but the caches').
  virtual int max_drafts() const { return 0; }
  // How a step's draft cost grows: Once (one pass for any number of drafts: DSpark's block), or
  // PerDraft (a pass per draft depth: the MTP's chain). For the verify-length scheduler.
  enum class Cost { Once, PerDraft };
  virtual Cost draft_cost() const { return Cost::PerDraft; }

  // The first position of a prompt of P tokens whose features prefill() reads: the target's last
  // block computes no features for the rows before it (they only extend its caches). A drafter
  // whose layers attend to a window reads the last window of a prompt: P − W.
  virtual int64_t prompt_features_from(int64_t prompt_length) const { return 0; }
  // The rows before its position a draft reads (W for a drafter whose layers attend to a window;
  // 0: every row). A state started at position p (state_at) drafts exactly from position p + W on:
  // the decoder may start an auto sequence's drafter at its prompt's last row and draft once the
  // plain steps have given it a whole window, rather than compute the prompt's last window.
  virtual int64_t window() const { return 0; }
  // The rows a draft at `position` (DraftRequest::position) computes besides its own: the MTP's
  // rows of the plain steps since the state last drafted (at most a window), a deferred prompt's
  // last window. What a draft after a plain streak costs more than a draft (the verify scheduler's
  // probes weigh it).
  virtual int64_t queued_rows(const ProposerState&, int64_t position) const { return 0; }
  // Fills the states over prompt chunks, in order per sequence; `streams` are the pass's
  // features (features()).
  virtual void prefill(std::span<const PrefillChunk> chunks, const Tensor& streams) = 0;

  // Proposes drafts for several sequences at once (each with its own count, sampling and
  // mask). A draft may be shorter than asked when the mask leaves the proposer no token.
  virtual void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) = 0;

  // After every verification of the sequences (with or without a proposal in their step).
  // Provisional state of rejected drafts is discarded.
  virtual void accept(std::span<const Verified> verified, const Tensor& streams) = 0;

  // The prefix cache (prefix_cache.h). keep_all_rows: the state keeps what a fork at any
  // length needs. fork: the state after `length` tokens of the sequence `from` belongs to, for a
  // sequence that shares its first length + 1 tokens (the next token may already be in `from`'s
  // rows), sharing `from`'s blocks; null where `from` no longer holds what that needs. Between
  // steps only (no draft in flight).
  virtual void keep_all_rows(ProposerState&, bool keep = true) {}
  virtual int64_t bytes_held() const { return 0; }  // what all its states hold together
  virtual std::unique_ptr<ProposerState> fork(const ProposerState& from, int64_t length) { return nullptr; }
  // A new state at `length` tokens whose rows before it are never read: a reused prefix's where the
  // source no longer holds them, for a prompt whose features from `length` on will come (length ≤
  // prompt_features_from(P)). Null: this proposer cannot start past 0.
  virtual std::unique_ptr<ProposerState> state_at(int64_t length) { return nullptr; }
  // The disk tier (cache/state_file.h): a state's rows written as stored, and read back into a new
  // state (throwing, naming the file, where they do not fit this proposer). False / null: this
  // proposer's states are not written.
  virtual bool save(const ProposerState&, StateWriter&) const { return false; }
  virtual std::unique_ptr<ProposerState> load(StateReader&) { return nullptr; }
};

}  // namespace dsv4
