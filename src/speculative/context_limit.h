// --max-context N: the longest sequence (prompt + generated tokens) a run may reach, checked
// before any work: against the model's positions and against this machine's available memory
// (the cache at N tokens for every sequence, plus the prefill's working set), so that a run
// that cannot fit is refused at start with the numbers, instead of killed later.
#pragma once
#include <cstdint>
#include <string>

#include "io/config.h"
#include "speculative/speculative_decoder.h"

namespace dsv4 {

struct ContextLimit {
  int64_t tokens = 0;  // N

  // N = requested (0: the model's maximum position). Throws when N exceeds the model's positions,
  // or when `sequences` caches of N tokens and the prefill's working set exceed `available_bytes`
  // (< 0: the system's MemAvailable).
  static ContextLimit check(const ModelConfig& c, int64_t requested, int64_t sequences, int64_t prefill_chunk,
                            int64_t available_bytes = -1);

  // A prompt of `prompt_tokens`: an error naming `what` if it leaves no room to generate;
  // max_new_tokens capped so that prompt + generated ≤ N.
  void apply(int64_t prompt_tokens, GenerateOptions& o, const std::string& what) const;
};

// Working memory of a prefill pass per prompt row (activations, expert intermediates, scores of
// one chunk; measured on the V4-Flash dimensions), the bound --max-context assumes.
constexpr int64_t kPrefillBytesPerRow = int64_t(5) << 19;  // 2.5 MiB

}  // namespace dsv4
