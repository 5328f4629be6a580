// What compilation knows about a grammar's rules beyond their text, so that a stack top's
// tokens can be classified with as much of the stack as is certain: a rule referenced from one
// place only returns there, so the frames below any stack top inside it are known (up to the
// first rule with several callers, or the root); below those, its callers (for the walk's
// over-approximated returns, grammar_matcher.h).
#pragma once
#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace dsv4::grammar {

struct TopContext {
  std::vector<uint32_t> frames;   // stack entries below the top that every stack holds (bottom first)
  bool bottom_is_root = false;    // below the frames: nothing (the root's end) ...
  uint32_t bottom_rule = 0;       // ... or the frames of this rule's unknown callers
};

class GrammarAnalysis {
 public:
  explicit GrammarAnalysis(const Grammar& g);
  uint32_t rule_of(uint32_t position) const { return rule_of_[position]; }
  TopContext context_of(uint32_t top) const;
  const std::vector<uint32_t>& callers(uint32_t rule) const { return sites_[rule]; }

 private:
  void compute_contexts();

  const Grammar& g_;
  std::vector<uint32_t> rule_of_;
  std::vector<std::vector<uint32_t>> sites_;   // per rule: positions that reference it (not self tail calls)
  std::vector<TopContext> rule_context_;       // per rule: frames below its own frame
};

}  // namespace dsv4::grammar
