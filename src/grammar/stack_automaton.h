// The pushdown matcher made a lazily built DFA: every distinct set of stacks the matcher reaches
// becomes a state, and a byte's step from a state is computed once (StackStepper::advance, the
// expansion of rules and alternatives) and then looked up. Walking the vocabulary through a
// grammar meets the same few hundred stack sets again and again — every character of a string
// is the same step — so a walk of 129k tokens becomes mostly table lookups, as it is for
// lexer-based engines (llguidance's derivative DFAs), while the grammar keeps its pushdown form.
//
// States are numbered from 0 (the empty set: no parse left, every step stays there). The
// automaton grows with use; forget() drops everything, between walks, when it holds more states
// than its budget (state numbers held by a caller are then invalid).
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/words_hash.h"

namespace dsv4::grammar {

class StackAutomaton {
 public:
  static constexpr uint32_t kDead = 0;
  // `step` does the steps (its over-approximation setting decides what the stacks mean).
  StackAutomaton(StackStepper& step, size_t max_states);

  uint32_t state_of(const StackSet& stacks);
  uint32_t state_of(std::span<const uint32_t> stack);
  // The state after byte b.
  uint32_t next(uint32_t state, uint8_t b) {
    const uint32_t row = states_[state].row;
    if (row != kNoRow) {
      const uint32_t t = rows_[size_t(row) * 256 + b];
      if (t != kUnknown) return t;
    }
    return compute_next(state, b);
  }
  size_t stack_count(uint32_t state) const { return states_[state].stacks.size(); }
  bool any_exact(uint32_t state) const { return states_[state].any_exact; }

  // Drops every state but the dead one when more than the budget exist; true when it did.
  bool forget_if_full();

 private:
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr uint32_t kUnknown = UINT32_MAX;
  struct State {
    StackSet stacks;
    uint32_t row = kNoRow;   // its 256 transitions in rows_, once one is asked for
    bool any_exact = false;  // holds a stack that is a real parse (StackStepper::exact)
  };
  uint32_t compute_next(uint32_t state, uint8_t b);
  uint32_t intern(const StackSet& stacks);
  void reset();

  StackStepper& step_;
  size_t max_states_;
  std::vector<State> states_;
  std::vector<uint32_t> rows_;
  std::unordered_map<std::vector<uint32_t>, uint32_t, WordsHash> ids_;
  std::vector<uint32_t> key_;
  StackSet single_, out_;
};

}  // namespace dsv4::grammar
