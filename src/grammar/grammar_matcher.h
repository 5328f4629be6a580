// The byte-level pushdown matcher of a grammar (grammar.h).
//
// A parse stack holds positions in the grammar's element array, bottom first: the top is the
// next element to match, the ones below are where to continue after the rules above end. The
// matcher keeps every stack the input so far allows (alternatives branch), each expanded until
// a byte set is on top; an empty stack means the root has matched completely. Stacks are
// stored flat and their buffers reused, so matching allocates nothing once warm.
//
// An ambiguous grammar can keep exponentially many parses alive: in `x ::= "[" x? x? "]" | "a"`
// every "[" doubles them (the inner x is the first or the second). Rather than let one request
// run for hours, a step that would hold more than kMaxParseStacks stacks throws a GrammarError
// naming the limit; grammars that schemas and tool calls produce hold a handful.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace dsv4::grammar {

inline constexpr size_t kMaxParseStacks = 1024;
// Compilation walks each token from every stack top with its callers over-approximated: their
// sets legitimately reach one stack per caller of a rule (hundreds, for a string's character
// class); they blow up only on grammars that matching would refuse anyway.
inline constexpr size_t kMaxCompileStacks = 64 * kMaxParseStacks;

// A set of distinct stacks, stored flat. Large sets are indexed by hash (a step over a set
// of n stacks adds up to n stacks: a linear search each would be quadratic).
class StackSet {
 public:
  void clear() {
    data_.clear();
    begin_.clear();
    hash_.clear();
    table_.clear();  // (keeps its capacity)
  }
  size_t size() const { return begin_.size(); }
  bool empty() const { return begin_.empty(); }
  std::span<const uint32_t> operator[](size_t i) const {
    const size_t e = i + 1 < begin_.size() ? begin_[i + 1] : data_.size();
    return {data_.data() + begin_[i], e - begin_[i]};
  }
  bool contains(std::span<const uint32_t> s) const;
  void add(std::span<const uint32_t> s);         // no-op when already present
  bool has_empty() const;                        // a stack that completed the root
  // The set as one sequence of words (stack lengths and entries), e.g. a cache key.
  void serialize(std::vector<uint32_t>& out) const;
  void append_to(std::vector<uint32_t>& out) const;  // the same, appended to `out`
  // Replaces the set with the stacks `words` holds (all of it: what serialize wrote).
  void assign_serialized(std::span<const uint32_t> words);

 private:
  static uint64_t hash_of(std::span<const uint32_t> s);
  bool contains(std::span<const uint32_t> s, uint64_t h) const;
  bool equal(size_t i, std::span<const uint32_t> s) const;
  void push(std::span<const uint32_t> s, uint64_t h);
  void index();  // (re)builds table_ for the current size

  static constexpr size_t kIndexFrom = 16;  // smaller sets are searched linearly
  std::vector<uint32_t> data_;
  std::vector<uint32_t> begin_;
  std::vector<uint64_t> hash_;   // per stack
  std::vector<uint32_t> table_;  // open addressing over the stacks (index + 1; 0 empty), from kIndexFrom stacks
};

class GrammarAnalysis;

// Expansion and byte steps over stack sets; holds the scratch buffers (one per thread).
class StackStepper {
 public:
  explicit StackStepper(const Grammar& g) : g_(g) {}

  // Compilation only: stacks whose frames below some point are unknown carry a marker at the
  // bottom, caller_marker(rule, false): "the unknown callers of `rule`". When everything above
  // it has returned, the stepper continues at every place that calls the rule (and at the
  // root's end), marking those stacks as over-approximations (caller_marker(.., true);
  // kApproximateEnd for the root's end). A token that no over-approximated parse takes is
  // rejected in every real context.
  void over_approximate(const GrammarAnalysis* analysis) {
    analysis_ = analysis;
    max_stacks_ = kMaxCompileStacks;
  }
  uint32_t caller_marker(uint32_t rule, bool approximate) const {
    return uint32_t(g_.elements.size() + rule + (approximate ? g_.rule_begin.size() : 0));
  }
  uint32_t approximate_end() const { return uint32_t(g_.elements.size() + 2 * g_.rule_begin.size()); }
  // Run time: a stack cut to its top entries carries this marker at the bottom, "frames not
  // given". A step that returns into it drops that stack and sets cut_reached(): only steps
  // that never do so are the steps of every stack with those top entries.
  uint32_t cut_marker() const { return approximate_end() + 1; }
  bool cut_reached() const { return cut_reached_; }
  void clear_cut_reached() { cut_reached_ = false; }
  // Is this stack a real parse (not through an over-approximated return)?
  bool exact(std::span<const uint32_t> stack) const {
    return stack.empty() || stack.front() < g_.elements.size() + g_.rule_begin.size();
  }
  const Grammar& grammar() const { return g_; }
  // The stacks at the start of the root rule.
  void start(StackSet& out);
  // Adds to `out` the expansions of `stack` (whose top may be a rule reference or an
  // alternative's end): stacks with a byte set on top, or empty.
  void expand(std::span<const uint32_t> stack, StackSet& out);
  // out = the stacks of `in` after byte b (cleared first). Empty stacks in `in` are ended.
  void advance(const StackSet& in, uint8_t b, StackSet& out);
  // Does advance(in, a) give what advance(in, b) gives? (The same stacks take both bytes: what
  // a step produces depends on which stacks take the byte, not on the byte.)
  bool same_step(const StackSet& in, uint8_t a, uint8_t b) const;

 private:
  void return_to_callers(uint32_t marker);  // pushes the over-approximated continuations
  void emit(StackSet& out);  // adds cur_ (throws past kMaxParseStacks)

  const Grammar& g_;
  const GrammarAnalysis* analysis_ = nullptr;
  bool cut_reached_ = false;
  size_t max_stacks_ = kMaxParseStacks;
  std::vector<uint32_t> work_, work_len_, cur_, seed_, expanded_markers_;
};

// Whole-input matching over bytes (grammar_accepts, tests).
class StackMatcher {
 public:
  explicit StackMatcher(const Grammar& g) : step_(g) { step_.start(cur_); }
  bool advance(uint8_t b) {  // false (state unchanged) when no stack takes b
    step_.advance(cur_, b, next_);
    if (next_.empty()) return false;
    std::swap(cur_, next_);
    return true;
  }
  bool complete() const { return cur_.has_empty(); }
  const StackSet& stacks() const { return cur_; }

 private:
  StackStepper step_;
  StackSet cur_, next_;
};

}  // namespace dsv4::grammar
