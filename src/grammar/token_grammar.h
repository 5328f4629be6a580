// A grammar compiled against a tokenizer's vocabulary, and the per-sequence token matcher.
//
// Masks are computed the way xgrammar does it: for every byte-set position P of the grammar
// (every possible stack top), compilation walks the whole vocabulary once, in sorted order so
// that tokens sharing a prefix share the work, starting from the stack [P] alone. A token is
//   - accepted at P when some parse consumes all its bytes without leaving P's rule: then it
//     is allowed whatever lies below P on the real stack;
//   - rejected at P when every parse fails inside P's rule;
//   - uncertain when a parse reaches the end of P's rule with bytes left (`",` after the last
//     character of a string): only these are checked against the full stack at run time.
// At run time a mask is the union, over the live stacks, of their top's accepted set plus the
// uncertain tokens that the full stack takes: a few kilobytes of OR and a short list of checks
// instead of a walk of 129k tokens. Special tokens (added tokens: EOS, </think>, tool markers)
// are never text to the grammar: only EOS is allowed, and only when the root has completed.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/words_hash.h"
#include "speculative/token_mask.h"

namespace dsv4::grammar {

struct SortedVocabulary;
class VocabularyWalker;

struct TokenVocabulary {
  std::vector<std::string> bytes;    // per token id: the bytes it stands for
  std::vector<uint8_t> special;      // per token id: 1 = a special token (never text)
  int32_t eos = -1;                  // allowed when the grammar is complete (-1: none)
  int32_t size() const { return int32_t(bytes.size()); }
};

class CompiledGrammar {
 public:
  // Walks the vocabulary for every stack top on `threads` threads (0 = all cores).
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> vocab, int threads = 0);

  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  size_t mask_words() const { return words_; }  // 64-bit words of a vocabulary bitmap
  const SortedVocabulary& sorted_vocabulary() const { return *sorted_; }

  // The tokens of one stack top. Accepted sets are mostly small (a literal's next byte) or,
  // inside strings, large and repeated across the copies of a repeated item: few tokens are kept
  // as a list, larger sets as a bitmap shared by every top with the same set.
  struct AtTop {
    std::vector<int32_t> accepted_ids;              // when fewer than kListBelow
    const std::vector<uint64_t>* accepted_bits = nullptr;  // otherwise: bitmap over the vocabulary
    std::vector<int32_t> uncertain;                 // token ids to check against the full stack (in byte order)
  };
  static constexpr size_t kListBelow = 1024;
  const AtTop& at_top(uint32_t position) const { return tops_[top_index_[position]]; }

  // Masks already computed, by stack set (serialized): generation revisits the same states
  // (every character of a string), so most masks are a lookup. Shared by all matchers of the
  // grammar; bounded (kMaxCachedMasks, the oldest replaced first).
  bool cached_mask(const std::vector<uint32_t>& key, std::span<uint64_t> bits) const;
  void cache_mask(const std::vector<uint32_t>& key, std::span<const uint64_t> bits) const;
  static constexpr size_t kMaxCachedMasks = 1024;
  int64_t masks_cached() const;  // stored so far (more than kMaxCachedMasks: the oldest were replaced)

  // Compilation figures (bench, tests).
  size_t stack_tops() const { return tops_.size(); }
  size_t uncertain_total() const;
  size_t memory_bytes() const;  // the per-top sets (not the mask cache)
  double compile_seconds() const { return compile_seconds_; }

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::shared_ptr<const SortedVocabulary> sorted_;
  size_t words_ = 0;
  std::vector<uint32_t> top_index_;   // element position → index into tops_
  std::vector<AtTop> tops_;
  std::vector<std::unique_ptr<std::vector<uint64_t>>> bitmaps_;  // the distinct large accepted sets
  double compile_seconds_ = 0;
  mutable std::mutex cache_mutex_;
  // Masks live in kMaxCachedMasks slots of one slab (zeroed, so touched, with the grammar), reused
  // in turn (the oldest goes first) together with their keys' map nodes: once the cache is
  // full, storing a mask allocates nothing.
  mutable std::unordered_map<std::vector<uint32_t>, uint32_t, WordsHash> cache_;   // key → slot
  mutable std::unique_ptr<uint64_t[]> cache_slab_;  // kMaxCachedMasks masks
  mutable std::vector<const std::vector<uint32_t>*> cache_slot_key_;            // slot → its key in cache_
  mutable uint32_t cache_next_slot_ = 0;
  mutable int64_t cache_stores_ = 0;
};

// The grammar state of one sequence, token by token, with rollback (speculative drafts).
// Keeps the stack set after every accepted token in one growing buffer, and reuses its other
// buffers: accept / rollback / mask allocate nothing once their buffers have grown to size
// (the history's buffer doubles when it fills: O(log n) allocations over n tokens).
class TokenMatcher {
 public:
  explicit TokenMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~TokenMatcher();

  // Advances by one token; false (and no change) when the grammar does not allow it.
  bool accept(int32_t token);
  // Would accept(token) succeed?
  bool allows(int32_t token);
  // Undoes the last n accepted tokens (n ≤ accepted()).
  void rollback(size_t n);
  void reset() { rollback(accepted()); }
  size_t accepted() const { return depth_; }

  bool complete() const;   // the root has matched: EOS is allowed
  bool finished() const;   // EOS accepted, or complete with nothing that can follow
  // After EOS only EOS is allowed (the decoder verifies rows after a drafted EOS and drops them).
  // Sets bits[v] for every token allowed next (bits: mask_words() words, cleared first).
  void fill_mask(std::span<uint64_t> bits);
  const CompiledGrammar& compiled() const { return *grammar_; }
  // Tests: walk the vocabulary for any stack with more than n uncertain tokens (default 2048).
  void set_walk_above(size_t n) { walk_above_ = n; }
  // Tests: masks of stacks cut below their checked top entries (fill_mask).
  struct CutStats {
    int64_t cut_cached = 0;    // served from the cache under a cut key
    int64_t cut_computed = 0;  // computed from the cut stacks (no step reached the cut)
    int64_t cut_reached = 0;   // a step reached the cut: computed again from the full stacks
  };
  const CutStats& cut_stats() const { return stats_; }

 private:
  const StackSet& current() const { return current_; }
  bool advance_bytes(const StackSet& from, const std::string& bytes, StackSet& to);
  // Sets the bit of each of `tokens` (a top's uncertain tokens, in byte order) that `stack` takes.
  void check_uncertain(std::span<const uint32_t> stack, std::span<const int32_t> tokens, std::span<uint64_t> bits);
  bool cut_stacks(const StackSet& s, StackSet& out);
  void compute_mask(const StackSet& s, std::span<uint64_t> bits);

  std::shared_ptr<const CompiledGrammar> grammar_;
  StackStepper step_;
  // The stacks after every accepted token, for rollback: one flat buffer (sets after 0, 1, ...
  // depth_ tokens, serialized one after another; saved_at_[i]: where the set after i begins),
  // so a sequence's new tokens append to it instead of allocating a set each.
  StackSet current_;                // the stacks after depth_ tokens
  StackSet next_;                   // allows(): the stacks after the token asked about
  std::vector<uint32_t> saved_;
  std::vector<size_t> saved_at_;    // depth_ + 2 entries
  std::vector<uint8_t> ended_;      // ended_[i]: EOS was the i-th token
  size_t depth_ = 0;
  StackSet scratch_a_, scratch_b_;
  std::vector<uint32_t> seen_tops_;
  std::vector<const std::vector<uint64_t>*> seen_bitmaps_;
  std::vector<uint32_t> key_, full_key_;
  StackSet cut_;
  bool cut_any_ = false;  // cut_stacks() cut some stack whose top has uncertain tokens
  std::vector<uint32_t> cut_buffer_;
  CutStats stats_;
  static constexpr size_t kCutDepth = 6;               // entries kept where uncertain tokens are checked
  static constexpr uint32_t kCutKeyTag = 0xFFFFFFFFu;  // ends the cache key of cut stacks (no full key does)
  // A stack whose top left more tokens uncertain than this is walked through the whole
  // vocabulary instead (then cached) rather than checked token by token.
  size_t walk_above_ = 2048;
  StackSet to_walk_;
  std::vector<StackSet> prefix_sets_;  // check_uncertain: the stacks after each prefix length
  // Exact walks of crowded stacks, through one automaton (kept across masks: the states of one
  // string or number recur at every character).
  std::unique_ptr<VocabularyWalker> walker_;
  static constexpr size_t kMaxAutomatonStates = 8192;
};

}  // namespace dsv4::grammar
