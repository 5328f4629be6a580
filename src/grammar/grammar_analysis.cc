#include "grammar/grammar_analysis.h"

namespace dsv4::grammar {
namespace {

void unite(ByteSet& a, const ByteSet& b, bool& changed) {
  for (size_t i = 0; i < 4; ++i) {
    const uint64_t w = a.bits[i] | b.bits[i];
    changed |= w != a.bits[i];
    a.bits[i] = w;
  }
}

}  // namespace

GrammarAnalysis::GrammarAnalysis(const Grammar& g) : g_(g) {
  const size_t rules = g.rule_begin.size();
  rule_of_.assign(g.elements.size(), 0);
  for (uint32_t r = 0; r < rules; ++r)
    for (uint32_t p = g.rule_begin[r];; ++p) {
      rule_of_[p] = r;
      if (g.at(p).kind == Element::kEndOfRule) break;
    }
  sites_.resize(rules);
  for (uint32_t p = 0; p < g.elements.size(); ++p) {
    if (g.at(p).kind != Element::kRuleRef) continue;
    const uint32_t r = g.at(p).value;
    if (r == rule_of_[p] && g.ends_alternative(p + 1)) continue;  // R ::= x R: a loop, not a caller
    sites_[r].push_back(p);
  }
  nullable_.assign(rules, 0);
  first_.assign(rules, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < rules; ++r)
      for (uint32_t a : g.alternatives(r)) {
        bool n = false;
        unite(first_[r], first_of(a, n), changed);
        if (n && !nullable_[r]) nullable_[r] = 1, changed = true;
      }
  }
  compute_follow();
  compute_contexts();
}

ByteSet GrammarAnalysis::first_of(uint32_t p, bool& nullable) const {
  ByteSet s;
  bool ignored = false;
  for (;; ++p) {
    if (g_.ends_alternative(p)) {
      nullable = true;
      return s;
    }
    const Element& e = g_.at(p);
    if (e.kind == Element::kBytes) {
      unite(s, g_.byte_sets[e.value], ignored);
      nullable = false;
      return s;
    }
    unite(s, first_[e.value], ignored);
    if (!nullable_[e.value]) {
      nullable = false;
      return s;
    }
  }
}

void GrammarAnalysis::compute_follow() {
  const size_t rules = g_.rule_begin.size();
  follow_.assign(rules, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < rules; ++r)
      for (uint32_t p : sites_[r]) {
        bool rest_nullable = false;
        unite(follow_[r], first_of(p + 1, rest_nullable), changed);
        if (rest_nullable) unite(follow_[r], follow_[rule_of_[p]], changed);
      }
  }
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
