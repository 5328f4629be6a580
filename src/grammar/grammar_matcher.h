// The byte-level pushdown matcher of a grammar (grammar.h).
//
// A parse stack holds positions in the grammar's element array, bottom first: the top is the
// next element to match, the ones below are where to continue after the rules above end. The
// matcher keeps every stack the input so far allows (alternatives branch), each expanded until
// a byte set is on top; an empty stack means the root has matched completely. Stacks are
// stored flat and their buffers reused, so matching allocates nothing once warm.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace dsv4::grammar {

// A set of distinct stacks, stored flat.
class StackSet {
 public:
  void clear() {
    data_.clear();
    begin_.clear();
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
  std::vector<uint32_t> data_;
  std::vector<uint32_t> begin_;
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
  void over_approximate(const GrammarAnalysis* analysis) { analysis_ = analysis; }
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

  const Grammar& g_;
  const GrammarAnalysis* analysis_ = nullptr;
  bool cut_reached_ = false;
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
