// Constrained decoding: a hook that says which tokens may come next.
//
// The decoder evaluates it for every position it chooses a token at — for drafts too,
// with the draft tokens before that position as part of the context — so a draft never
// proposes a disallowed token and the target's choice is masked the same way.
//
// The answer is a bitmap, one bit per vocabulary id (bit v % 64 of word v / 64): grammars
// compute their masks as unions of bitmaps, so handing one over costs a copy of V/8 bytes
// (16 KB for 129k tokens) instead of the 129 KB write of one byte per token — at every draft
// position of every step.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace dsv4 {

// Words of a bitmap over `vocab` tokens.
inline size_t mask_words(size_t vocab) { return (vocab + 63) / 64; }
inline bool is_allowed(std::span<const uint64_t> bits, size_t v) { return (bits[v >> 6] >> (v & 63)) & 1; }
inline void allow(std::span<uint64_t> bits, size_t v) { bits[v >> 6] |= uint64_t(1) << (v & 63); }
// Allowed tokens among ids [0, n).
inline size_t count_allowed(std::span<const uint64_t> bits, size_t n) {
  size_t c = 0;
  for (size_t w = 0; w < n / 64; ++w) c += size_t(std::popcount(bits[w]));
  if (n % 64) c += size_t(std::popcount(bits[n / 64] & ((uint64_t(1) << (n % 64)) - 1)));
  return c;
}

class TokenMask {
 public:
  virtual ~TokenMask() = default;
  // Writes every word of `allowed` (mask_words(V) words for a vocabulary of V tokens): bit v set
  // when token v may follow `context` (every token of sequence `sequence` so far, prompt
  // included). Bits at or past V are never read.
  virtual void allowed_tokens(size_t sequence, std::span<const int32_t> context, std::span<uint64_t> allowed) const = 0;
};

}  // namespace dsv4
