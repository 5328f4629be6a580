// GBNF text → byte-level grammar (grammar.h): the syntax tree of each rule (gbnf_syntax.h),
// then lowering: groups with alternatives and repetitions become rules of their
// own (repetition is right-recursive, so the matcher's stack does not grow with the count),
// character classes become UTF-8 byte sequences.
#include "grammar/grammar.h"

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>

#include "grammar/gbnf_syntax.h"
#include "grammar/grammar_matcher.h"
#include "grammar/utf8_ranges.h"

namespace dsv4::grammar {
namespace {

using gbnf::Alts;
using gbnf::Node;
using gbnf::Seq;

// ---- lowering to elements

class Lowering {
 public:
  explicit Lowering(std::vector<std::pair<std::string, Alts>> rules) : src_(std::move(rules)) {
    for (const auto& [name, alts] : src_) {
      if (ids_.count(name)) throw GrammarError(cat("grammar: rule '", name, "' is defined twice"));
      ids_[name] = uint32_t(ids_.size());
    }
    bodies_.resize(ids_.size());
    g_.rule_names.resize(ids_.size());
    for (const auto& [name, id] : ids_) g_.rule_names[id] = name;
  }

  Grammar run() {
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw GrammarError("grammar: no rule named 'root'");
    g_.root = root->second;
    inline_small_rules();
    for (const auto& [name, alts] : src_) {
      std::vector<ElemSeq> body = lower_alts(alts, name);  // may add rules (groups, repetitions)
      bodies_[ids_[name]] = std::move(body);
    }
    g_.rule_begin.resize(bodies_.size());
    for (size_t r = 0; r < bodies_.size(); ++r) {
      g_.rule_begin[r] = uint32_t(g_.elements.size());
      for (size_t a = 0; a < bodies_[r].size(); ++a) {
        g_.elements.insert(g_.elements.end(), bodies_[r][a].begin(), bodies_[r][a].end());
        g_.elements.push_back({a + 1 == bodies_[r].size() ? Element::kEndOfRule : Element::kEndOfAlternative, 0});
      }
    }
    return std::move(g_);
  }

 private:
  using ElemSeq = std::vector<Element>;

  // Small rules that are not recursive are copied into each place that uses them (as groups),
  // so that every copy has one caller: compilation then knows what follows each copy and
  // classifies tokens that run past its end exactly, instead of leaving them uncertain
  // (`ws` and a string's `char` are used in dozens of places).
  static constexpr size_t kInlineNodes = 30;
  // Copies of a repeated item that get rules of their own (a JSON string's maxLength of up to
  // 128 characters: every character position then has a known continuation), while the grammar
  // has fewer than kCloneRuleBudget rules (nested repetitions would multiply).
  static constexpr int kCloneCopies = 128;
  static constexpr size_t kCloneRuleBudget = 20000;
  void inline_small_rules() {
    std::map<std::string, int> state;  // 1: in progress (recursive), 2: done
    std::map<std::string, size_t> size;
    std::function<size_t(const Alts&)> count = [&](const Alts& alts) {
      size_t n = 0;
      for (const Seq& seq : alts)
        for (const Node& node : seq) n += 1 + (node.kind == Node::kGroup ? count(*node.group) : 0);
      return n;
    };
    std::function<void(Alts&)> rewrite;
    std::function<bool(const std::string&)> inlinable = [&](const std::string& name) {
      const auto it = ids_.find(name);
      if (it == ids_.end() || name == "root") return false;
      Alts& body = src_[it->second].second;
      if (state[name] == 1) return false;  // recursive: stays a rule
      if (state[name] == 0) {
        state[name] = 1;
        rewrite(body);
        size[name] = count(body);
        state[name] = 2;
      }
      return size[name] <= kInlineNodes && !recursive_.count(name);
    };
    rewrite = [&](Alts& alts) {
      for (Seq& seq : alts)
        for (Node& node : seq) {
          if (node.kind == Node::kGroup) rewrite(*node.group);
          if (node.kind != Node::kRef) continue;
          if (state[node.ref] == 1) recursive_.insert(node.ref);  // reached again while in progress
          if (!inlinable(node.ref)) continue;
          node.kind = Node::kGroup;
          node.group = std::make_shared<Alts>(src_[ids_[node.ref]].second);
        }
    };
    for (auto& [name, alts] : src_) {
      if (state[name] == 0) {
        state[name] = 1;
        rewrite(alts);
        size[name] = count(alts);
        state[name] = 2;
      }
    }
  }
  std::set<std::string> recursive_;

  uint32_t new_rule(const std::string& name, std::vector<ElemSeq> body) {
    const uint32_t id = uint32_t(bodies_.size());
    bodies_.push_back(std::move(body));
    g_.rule_names.push_back(name);
    return id;
  }
  uint32_t byte_set(const ByteSet& s) {
    for (size_t i = 0; i < g_.byte_sets.size(); ++i)
      if (g_.byte_sets[i] == s) return uint32_t(i);
    g_.byte_sets.push_back(s);
    return uint32_t(g_.byte_sets.size() - 1);
  }

  std::vector<ElemSeq> lower_alts(const Alts& alts, const std::string& rule) {
    std::vector<ElemSeq> out;
    for (const Seq& seq : alts) {
      ElemSeq e;
      for (const Node& n : seq) lower_repeated(n, rule, e);
      out.push_back(std::move(e));
    }
    return out;
  }

  // The elements matching n once.
  void lower_once(const Node& n, const std::string& rule, ElemSeq& out) {
    switch (n.kind) {
      case Node::kLiteral:
        for (unsigned char c : n.literal) {
          ByteSet s;
          s.add(c);
          out.push_back({Element::kBytes, byte_set(s)});
        }
        return;
      case Node::kClass:
        out.push_back(class_element(n.cls, rule, n.line));
        return;
      case Node::kRef: {
        const auto it = ids_.find(n.ref);
        if (it == ids_.end())
          throw GrammarError(cat("grammar: rule '", rule, "' (line ", n.line, ") refers to undefined rule '", n.ref, "'"));
        out.push_back({Element::kRuleRef, it->second});
        return;
      }
      case Node::kGroup:
        if (n.group->size() == 1) {  // a plain sequence: inline
          for (const Node& m : n.group->front()) lower_repeated(m, rule, out);
        } else {
          out.push_back({Element::kRuleRef, new_rule(rule + "-group", lower_alts(*n.group, rule))});
        }
        return;
    }
  }

  // A single element standing for one match of n (a rule when n is several elements).
  Element as_element(const Node& n, const std::string& rule) {
    ElemSeq e;
    lower_once(n, rule, e);
    if (e.size() == 1) return e.front();
    return {Element::kRuleRef, new_rule(rule + "-item", {e})};
  }

  void lower_repeated(const Node& n, const std::string& rule, ElemSeq& out) {
    if (n.min == 1 && n.max == 1) return lower_once(n, rule, out);
    // Up to kCloneCopies copies of the item get rules of their own (a multi-byte class, a
    // group): a rule with one caller has a known return address, which lets compilation
    // classify tokens inside it exactly instead of leaving them to be checked at run time.
    // Beyond that the copies share one item (compile time grows with every copy).
    const bool clone = (n.max < 0 ? n.min + 1 : n.max) <= kCloneCopies && bodies_.size() < kCloneRuleBudget;
    const Element shared = clone ? Element{} : as_element(n, rule);
    auto item = [&] { return clone ? as_element(n, rule) : shared; };
    for (int i = 0; i < n.min; ++i) out.push_back(item());
    if (n.max < 0) {  // item*: R ::= item R | ε
      const uint32_t r = new_rule(rule + "-star", {});
      bodies_[r] = {{item(), {Element::kRuleRef, r}}, {}};
      out.push_back({Element::kRuleRef, r});
    } else if (n.max > n.min) {  // up to (max - min) more: O_k ::= item O_{k-1} | ε
      uint32_t inner = 0;
      for (int k = 1; k <= n.max - n.min; ++k) {
        ElemSeq more{item()};
        if (k > 1) more.push_back({Element::kRuleRef, inner});
        inner = new_rule(cat(rule, "-upto", k), {more, {}});
      }
      out.push_back({Element::kRuleRef, inner});
    }
  }

  Element class_element(const CodeRanges& cls, const std::string& rule, int line) {
    const auto key = cls;
    if (const auto it = class_rules_.find(key); it != class_rules_.end()) return it->second;  // single-byte only
    std::vector<std::vector<ByteRange>> seqs = utf8_sequences(cls);
    if (seqs.empty()) throw GrammarError(cat("grammar: rule '", rule, "' (line ", line, ") has an empty character class"));
    std::vector<ElemSeq> alts;
    ByteSet single;
    bool has_single = false;
    for (const auto& seq : seqs) {
      if (seq.size() == 1) {
        single.add_range(seq[0].lo, seq[0].hi);
        has_single = true;
        continue;
      }
      ElemSeq e;
      for (const ByteRange& b : seq) {
        ByteSet s;
        s.add_range(b.lo, b.hi);
        e.push_back({Element::kBytes, byte_set(s)});
      }
      alts.push_back(std::move(e));
    }
    Element el;
    if (alts.empty()) {
      el = {Element::kBytes, byte_set(single)};
    } else {
      if (has_single) alts.insert(alts.begin(), ElemSeq{{Element::kBytes, byte_set(single)}});
      el = {Element::kRuleRef, new_rule(rule + "-class", std::move(alts))};
    }
    if (el.kind == Element::kBytes) class_rules_[key] = el;  // a rule is never shared (see lower_repeated)
    return el;
  }

  std::vector<std::pair<std::string, Alts>> src_;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::vector<ElemSeq>> bodies_;
  std::map<CodeRanges, Element> class_rules_;
  Grammar g_;
};

// Refuses left recursion (the matcher's eager expansion would not end): a rule reachable from
// itself through leftmost positions, passing only over rules that can match nothing.
void check_left_recursion(const Grammar& g) {
  const size_t n = g.rule_begin.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t a : g.alternatives(r)) {
        uint32_t p = a;
        while (!g.ends_alternative(p) && g.at(p).kind == Element::kRuleRef && nullable[g.at(p).value]) ++p;
        if (g.ends_alternative(p)) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> left(n);  // rules at a leftmost position of r
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t a : g.alternatives(r))
      for (uint32_t p = a; !g.ends_alternative(p) && g.at(p).kind == Element::kRuleRef; ++p) {
        left[r].push_back(g.at(p).value);
        if (!nullable[g.at(p).value]) break;
      }
  std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < n; ++start) {
    if (state[start]) continue;
    path.push_back({start, 0});
    state[start] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == left[r].size()) {
        state[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t q = left[r][i++];
      if (state[q] == 1)
        throw GrammarError(cat("grammar: rule '", g.rule_names[q], "' is left-recursive (or repeats something that ",
                               "can match nothing); rewrite it right-recursively"));
      if (state[q] == 0) {
        state[q] = 1;
        path.push_back({q, 0});
      }
    }
  }
}

}  // namespace

std::vector<uint32_t> Grammar::alternatives(uint32_t rule) const {
  std::vector<uint32_t> out;
  uint32_t p = rule_begin[rule];
  out.push_back(p);
  for (;; ++p) {
    if (elements[p].kind == Element::kEndOfRule) break;
    if (elements[p].kind == Element::kEndOfAlternative) out.push_back(p + 1);
  }
  return out;
}

size_t Grammar::terminal_count() const {
  size_t n = 0;
  for (const Element& e : elements) n += e.kind == Element::kBytes;
  return n;
}

Grammar parse_gbnf(std::string_view text) {
  Grammar g = Lowering(gbnf::parse_rules(text)).run();
  check_left_recursion(g);
  return g;
}

bool grammar_accepts(const Grammar& g, std::string_view text) {
  StackMatcher m(g);
  for (unsigned char c : text)
    if (!m.advance(c)) return false;
  return m.complete();
}

bool grammar_accepts_prefix(const Grammar& g, std::string_view text) {
  StackMatcher m(g);
  for (unsigned char c : text)
    if (!m.advance(c)) return false;
  return true;
}

}  // namespace dsv4::grammar
