// Walking the whole vocabulary through the grammar from one stack: tokens in sorted byte order,
// so that tokens sharing a prefix share its parse (a depth-first walk of the token trie), and a
// prefix that dies skips every token under it. Steps go through a StackAutomaton: each distinct
// (stack set, byte) step is computed once per walker, then looked up. Used at compile time for
// each stack top (with over-approximated callers, grammar_matcher.h) and at run time for a stack
// whose top left many tokens uncertain (exact).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/stack_automaton.h"
#include "grammar/token_grammar.h"

namespace dsv4::grammar {

struct SortedVocabulary {
  std::vector<int32_t> ids;      // text tokens (not special, not empty) by their bytes
  std::vector<uint32_t> lcp;     // common prefix length with the one before
  size_t max_length = 0;
  // subtree_end[d - 1][i]: the first index after i whose token does not share token i's first
  // d bytes — where the walk resumes when that prefix is dead (d = 1..kSkipDepths).
  static constexpr size_t kSkipDepths = 3;
  std::vector<uint32_t> subtree_end[kSkipDepths];
};
SortedVocabulary sort_vocabulary(const TokenVocabulary& v);

class VocabularyWalker {
 public:
  // analysis: over-approximate unknown callers (compile time); null: stacks are complete.
  VocabularyWalker(const Grammar& g, const GrammarAnalysis* analysis, const TokenVocabulary& v,
                   const SortedVocabulary& sorted, size_t max_states = kDefaultMaxStates);
  // The automaton's budget: past it, it starts again empty at the next walk (~1.5 KB per state).
  static constexpr size_t kDefaultMaxStates = 1 << 15;
  // Calls on_token(id, exact) for every token that some parse from `start` consumes entirely;
  // exact: some such parse never returned through an over-approximated caller.
  template <typename F>
  void walk(std::span<const uint32_t> start, F&& on_token) {
    automaton_.forget_if_full();
    states_[0] = automaton_.state_of(start);
    walk_from_start(on_token);
  }
  // The same from several stacks at once (the union of their tokens).
  template <typename F>
  void walk(const StackSet& start, F&& on_token) {
    automaton_.forget_if_full();
    states_[0] = automaton_.state_of(start);
    walk_from_start(on_token);
  }

 private:
  template <typename F>
  void walk_from_start(F&& on_token);

  // Over-approximated returns can multiply parses (a rule called from 40 places returns to
  // all of them); past this many, a token is left uncertain (checked at run time) rather than
  // followed at quadratic cost.
  static constexpr size_t kMaxStacks = 64;
  StackStepper step_;
  StackAutomaton automaton_;
  bool approximate_;
  const TokenVocabulary& vocab_;
  const SortedVocabulary& sorted_;
  std::vector<uint32_t> states_;   // states_[d]: the automaton's state after the first d bytes
};

template <typename F>
void VocabularyWalker::walk_from_start(F&& on_token) {
  constexpr uint32_t kDead = StackAutomaton::kDead;
  size_t valid = 0;  // states_[0..valid] hold the previous token's prefix
  for (size_t i = 0; i < sorted_.ids.size(); ++i) {
    const int32_t id = sorted_.ids[i];
    const std::string& t = vocab_.bytes[size_t(id)];
    size_t d = std::min<size_t>(valid, sorted_.lcp[i]);
    bool crowded = false;
    while (d < t.size() && states_[d] != kDead) {
      if (approximate_ && automaton_.stack_count(states_[d]) > kMaxStacks) {  // too many parses: leave it uncertain
        crowded = true;
        break;
      }
      states_[d + 1] = automaton_.next(states_[d], static_cast<uint8_t>(t[d]));
      ++d;
    }
    valid = d;
    if (crowded) {
      on_token(id, false);
      continue;
    }
    if (d < t.size() || states_[d] == kDead) {  // rejected
      // The prefix t[0..d) is dead: so is every token after this one that shares it.
      if (d >= 1 && d <= SortedVocabulary::kSkipDepths && states_[d] == kDead) {
        i = sorted_.subtree_end[d - 1][i] - 1;
        valid = std::min<size_t>(valid, d - 1);
      }
      continue;
    }
    on_token(id, automaton_.any_exact(states_[d]));
  }
}

}  // namespace dsv4::grammar
