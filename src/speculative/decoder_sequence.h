// The decoder's record of one sequence (private to speculative_decoder.cc and draft_step.cc).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "speculative/speculative_decoder.h"
#include "speculative/verify_scheduler.h"

namespace dsv4 {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct SpeculativeDecoder::Sequence {
  SequenceId id = 0;
  size_t mask_sequence = 0;          // what the mask is told
  GenerateOptions options;
  std::vector<int32_t> prompt;       // until the prefill
  int64_t prefilled = 0;             // prompt tokens the target has processed
  std::unique_ptr<SequenceCache> cache;
  std::unique_ptr<ProposerState> draft_state;
  int64_t reused = 0;                // prompt tokens taken from another sequence's state
  std::vector<int32_t> context;      // prompt + emitted tokens (the last one not yet processed by the target)
  std::mt19937_64 rng;
  SequenceOutput out;
  AcceptanceHistory acceptance;      // by draft position (the auto scheduler's)
  // An auto sequence whose drafter starts at its prompt's last row (starts_drafter_late): the
  // prompt's last window goes through the target's last block for nothing, and the sequence
  // drafts from `draft_from` tokens on, when its plain steps have given the drafter a window.
  bool late_drafter = false;
  bool late_decided = false;         // (at its first prefill step, or at a start from a prefix)
  int64_t draft_from = 0;            // the least cache length at which it may draft
  bool done = false;

  int32_t last() const { return context.back(); }
};

}  // namespace dsv4
