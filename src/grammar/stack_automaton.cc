#include "grammar/stack_automaton.h"

namespace dsv4::grammar {

StackAutomaton::StackAutomaton(StackStepper& step, size_t max_states) : step_(step), max_states_(max_states) {
  reset();
}

void StackAutomaton::reset() {
  states_.clear();
  rows_.clear();
  ids_.clear();
  states_.emplace_back();  // kDead: the empty set
  ids_.emplace(std::vector<uint32_t>{}, kDead);
}

bool StackAutomaton::forget_if_full() {
  if (states_.size() <= max_states_) return false;
  reset();
  return true;
}

uint32_t StackAutomaton::intern(const StackSet& stacks) {
  stacks.serialize(key_);
  const auto [it, added] = ids_.try_emplace(key_, uint32_t(states_.size()));
  if (!added) return it->second;
  State s;
  s.stacks = stacks;
  for (size_t i = 0; i < stacks.size() && !s.any_exact; ++i) s.any_exact = step_.exact(stacks[i]);
  states_.push_back(std::move(s));
  return it->second;
}

uint32_t StackAutomaton::state_of(const StackSet& stacks) { return intern(stacks); }

uint32_t StackAutomaton::state_of(std::span<const uint32_t> stack) {
  single_.clear();
  single_.add(stack);
  return intern(single_);
}

uint32_t StackAutomaton::compute_next(uint32_t state, uint8_t b) {
  step_.advance(states_[state].stacks, b, out_);
  const uint32_t t = intern(out_);  // (may grow states_: index again below)
  if (states_[state].row == kNoRow) {
    states_[state].row = uint32_t(rows_.size() / 256);
    rows_.resize(rows_.size() + 256, kUnknown);
  }
  rows_[size_t(states_[state].row) * 256 + b] = t;
  return t;
}

}  // namespace dsv4::grammar
