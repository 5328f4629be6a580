// Exact prefix reuse across requests (`dsv4 serve`): finished sequences' states, kept with every
// row (GenerateOptions::reusable), indexed by their tokens. A new prompt starts from the state
// that shares the longest prefix with it — a kept one or a running sequence's — cut at that
// length (SequenceCache::fork: the blocks below the cut shared, the one it falls in copied), and
// prefills only the rest, bit for bit as if it had prefilled everything.
//
// Every row of our caches is addressed by position and a cut is exact, so a state can be cut at
// any token: inside the window, mid compressor block, anywhere. The cut is one token short of the
// prefix the prompt shares with the tokens the state has read (the MTP's row at a position reads
// the next token, which may lie past the target's rows: a prompt being prefilled, the last token
// generated), within the state's length and short of the prompt's end (its last token's pass
// gives the first logits). A conversation resent with a new turn reuses the whole kept sequence.
//
// Bounded in bytes: least recently used entries go first. The bytes counted are those evicting
// every entry would free (what the pools hold beyond the running sequences), so entries sharing
// blocks with each other or with running sequences are not counted twice.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "speculative/speculative_decoder.h"

namespace dsv4 {

// The number of leading tokens a and b share.
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);
// The tokens a state that has read `tokens`, holds `length` of them and can be cut from
// `min_length` on can give `prompt` (0: none; see above).
int64_t usable_cut(std::span<const int32_t> tokens, int64_t length, int64_t min_length,
                   std::span<const int32_t> prompt);

class PrefixCache {
 public:
  struct Match {
    PrefixSource source;   // empty (no cache) when nothing is shared
    int64_t cut = 0;       // tokens to reuse (0: none)
    int64_t live = -1;     // the index in `live` it came from, -1 for a kept entry or none
  };
  // The best start for `prompt`: the kept entries' and the `live` sequences' states, the longest
  // usable cut (a state that keeps the rows of lengths from min_truncate_length() only is usable
  // from there). A kept entry found is marked used.
  Match find(std::span<const int32_t> prompt, std::span<const PrefixSource> live = {});

  // Keeps a finished sequence's state (an empty one, or one of no tokens, is dropped).
  void insert(SequenceState state);
  // Takes out the least recently used entry (an empty state when there is none).
  SequenceState take_oldest();
  void clear() { entries_.clear(); }
  // The entries, most recently used first (for writing them out).
  const std::list<SequenceState>& entries() const { return entries_; }

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

 private:
  std::list<SequenceState> entries_;  // most recently used first
};

}  // namespace dsv4
