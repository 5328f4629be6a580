// Constrained decoding under a grammar, as the decoder's TokenMask (speculative/token_mask.h).
//
// The decoder asks for the allowed tokens at every position it chooses a token at — the
// target's verification rows and every draft depth — giving the whole context (prompt, output,
// and the drafts before that position). The grammar's state is therefore a function of the
// context, never a separate thing to keep in step: each call finds how much of the output the
// sequence's matcher already holds (common prefix), rolls back the rest (rejected drafts) and
// advances over what is new. Only accepted tokens stay in the matcher once the next call comes.
//
// Reasoning: in thinking mode the output starts with reasoning, which is free text; the grammar
// applies from the token after the reasoning's end (</think>) — wherever that falls, in a draft
// or in a verified row. EOS is not allowed before the grammar completes (the answer must come),
// then it is the only token allowed when nothing can follow.
//
// A grammar too ambiguous to follow (grammar_matcher.h: kMaxParseStacks) fails only its own
// sequences: from the token where it gave up, the mask allows EOS alone, and error() says why
// — the request reports that error, its neighbours in the batch go on.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/token_grammar.h"
#include "speculative/token_mask.h"

namespace dsv4::grammar {

struct GrammarMaskOptions {
  bool starts_in_reasoning = false;   // thinking mode: the output begins with reasoning
  int32_t reasoning_end = -1;         // the token that ends it (</think>)
};

class GrammarMask : public TokenMask {
 public:
  GrammarMask(std::shared_ptr<const CompiledGrammar> grammar, GrammarMaskOptions options = {});

  // Where sequence `sequence`'s output begins in its context. Optional: without it, the first
  // call's context is taken as the prompt (the decoder's first call is for the first output token).
  void begin(size_t sequence, size_t prompt_tokens);
  void allowed_tokens(size_t sequence, std::span<const int32_t> context, std::span<uint64_t> allowed) const override;

  // Does `output` (the tokens generated after the prompt, EOS included or not) complete the
  // grammar? False when the budget ran out inside it, or inside the reasoning.
  bool complete(std::span<const int32_t> output) const;
  // Why the grammar gave up on some sequence (empty: it has not).
  const std::string& error() const { return error_; }

  struct Counters {
    int64_t masks = 0;          // allowed_tokens calls under the grammar
    int64_t free_masks = 0;     // calls inside the reasoning (everything allowed but EOS)
    int64_t tokens_fed = 0;     // tokens the matchers advanced over
    int64_t tokens_rolled_back = 0;
    double seconds = 0, max_seconds = 0;  // of the masks under the grammar (matcher steps included)
    // Their times by bucket: [i] counts times in [2^((i-1)/4), 2^(i/4)) µs, the last one longer.
    static constexpr size_t kBuckets = 56;
    std::array<int64_t, kBuckets> histogram{};
    void record(double seconds);
    double percentile_us(double p) const;  // the upper edge of the bucket holding the p-quantile
  };
  const Counters& counters() const { return counters_; }
  const CompiledGrammar& compiled() const { return *grammar_; }

 private:
  struct State {
    size_t prompt = SIZE_MAX;
    std::vector<int32_t> fed;           // the output tokens under the grammar the matcher holds
    std::unique_ptr<TokenMatcher> matcher;
    bool failed = false;                // the matcher gave up: EOS alone from here on
  };
  void follow(State& s, size_t sequence, std::span<const int32_t> context, std::span<const int32_t> part,
              std::span<uint64_t> allowed) const;
  // The part of `output` the grammar applies to; false while still in the reasoning.
  bool grammar_part(std::span<const int32_t> output, std::span<const int32_t>& part) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  GrammarMaskOptions options_;
  mutable std::map<size_t, State> states_;
  mutable std::vector<uint64_t> bits_;  // when the caller's bitmap is shorter than the vocabulary's
  mutable Counters counters_;
  mutable std::string error_;
};

}  // namespace dsv4::grammar
