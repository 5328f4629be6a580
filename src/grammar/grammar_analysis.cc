#include "grammar/grammar_analysis.h"

namespace dsv4::grammar {
GrammarAnalysis::GrammarAnalysis(const Grammar& g) : g_(g) {
  const size_t rules = g.rule_begin.size();
  rule_of_.assign(g.elements.size(), 0);
  for (uint32_t r = 0; r < rules; ++r)
    for (uint32_t p = g.rule_begin[r];; ++p) {
      rule_of_[p] = r;
      if (g.at(p).kind == Element::kEndOfRule) break;
    }
  // Only rules the root reaches call anything: lowering leaves rules behind that it inlined
  // everywhere, and a reference from one of those would make a callee's return look unknown.
  std::vector<uint8_t> reachable(rules, 0);
  std::vector<uint32_t> todo = {g.root};
  reachable[g.root] = 1;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (uint32_t p = g.rule_begin[r]; g.at(p).kind != Element::kEndOfRule; ++p)
      if (g.at(p).kind == Element::kRuleRef && !reachable[g.at(p).value]) {
        reachable[g.at(p).value] = 1;
        todo.push_back(g.at(p).value);
      }
  }
  sites_.resize(rules);
  for (uint32_t p = 0; p < g.elements.size(); ++p) {
    if (g.at(p).kind != Element::kRuleRef || !reachable[rule_of_[p]]) continue;
    const uint32_t r = g.at(p).value;
    if (r == rule_of_[p] && g.ends_alternative(p + 1)) continue;  // R ::= x R: a loop, not a caller
    sites_[r].push_back(p);
  }
  compute_contexts();
}

// A rule's context: the root's is the bottom (unless the root is also called); a rule with
// one caller has its caller's context plus the caller's return frame (none for a tail call).
void GrammarAnalysis::compute_contexts() {
  const size_t rules = g_.rule_begin.size();
  rule_context_.assign(rules, TopContext{});
  std::vector<uint8_t> state(rules, 0);  // 0 new, 1 in progress, 2 done
  auto solve = [&](auto&& self, uint32_t r) -> const TopContext& {
    TopContext& c = rule_context_[r];
    if (state[r] == 2) return c;
    c.bottom_rule = r;  // the default: callers unknown
    const size_t callers = sites_[r].size() + (r == g_.root ? 1 : 0);
    if (state[r] == 1 || callers != 1) {
      state[r] = 2;
      return c;
    }
    state[r] = 1;
    if (r == g_.root) {
      c.bottom_is_root = true;
    } else {
      const uint32_t p = sites_[r].front();
      const TopContext parent = self(self, rule_of_[p]);
      if (state[r] != 2) {  // not resolved through a cycle meanwhile
        c = parent;
        if (!g_.ends_alternative(p + 1)) c.frames.push_back(p + 1);
      }
    }
    state[r] = 2;
    return c;
  };
  for (uint32_t r = 0; r < rules; ++r) solve(solve, r);
}

TopContext GrammarAnalysis::context_of(uint32_t top) const { return rule_context_[rule_of_[top]]; }

}  // namespace dsv4::grammar
