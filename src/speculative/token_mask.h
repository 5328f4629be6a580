// Constrained decoding: a hook that says which tokens may come next.
//
// The decoder evaluates it for every position it chooses a token at — for drafts too,
// with the draft tokens before that position as part of the context — so a draft never
// proposes a disallowed token and the target's choice is masked the same way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4 {

class TokenMask {
 public:
  virtual ~TokenMask() = default;
  // Sets allowed[v] (1 = allowed) for the token that follows `context` (every token of
  // sequence `sequence` so far, prompt included). `allowed` has one entry per vocabulary id.
  virtual void allowed_tokens(size_t sequence, std::span<const int32_t> context, std::span<uint8_t> allowed) const = 0;
};

}  // namespace dsv4
