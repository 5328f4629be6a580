#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <bit>
#include <string_view>

#include "grammar/grammar_analysis.h"

namespace dsv4::grammar {

uint64_t StackSet::hash_of(std::span<const uint32_t> s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  for (uint32_t w : s) h = (h ^ w) * 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 32);
}

// From the top down: the stacks of a set mostly share their bottom and differ at the top.
bool StackSet::equal(size_t i, std::span<const uint32_t> s) const {
  const auto t = (*this)[i];
  return t.size() == s.size() && std::equal(t.rbegin(), t.rend(), s.rbegin());
}

bool StackSet::contains(std::span<const uint32_t> s) const { return contains(s, hash_of(s)); }

bool StackSet::contains(std::span<const uint32_t> s, uint64_t h) const {
  if (table_.empty()) {
    for (size_t i = 0; i < size(); ++i)
      if (hash_[i] == h && equal(i, s)) return true;
    return false;
  }
  const size_t m = table_.size() - 1;
  for (size_t j = size_t(h) & m; table_[j]; j = (j + 1) & m)
    if (hash_[table_[j] - 1] == h && equal(table_[j] - 1, s)) return true;
  return false;
}

void StackSet::add(std::span<const uint32_t> s) {
  const uint64_t h = hash_of(s);
  if (!contains(s, h)) push(s, h);
}

void StackSet::push(std::span<const uint32_t> s, uint64_t h) {
  begin_.push_back(uint32_t(data_.size()));
  data_.insert(data_.end(), s.begin(), s.end());
  hash_.push_back(h);
  if (size() < kIndexFrom) return;
  if (2 * size() > table_.size()) return index();  // (kept at most half full)
  const size_t m = table_.size() - 1;
  size_t j = size_t(h) & m;
  while (table_[j]) j = (j + 1) & m;
  table_[j] = uint32_t(size());
}

void StackSet::index() {
  table_.assign(std::bit_ceil(4 * size()), 0);
  const size_t m = table_.size() - 1;
  for (size_t i = 0; i < size(); ++i) {
    size_t j = size_t(hash_[i]) & m;
    while (table_[j]) j = (j + 1) & m;
    table_[j] = uint32_t(i + 1);
  }
}

bool StackSet::has_empty() const {
  for (size_t i = 0; i < size(); ++i)
    if ((*this)[i].empty()) return true;
  return false;
}

void StackSet::serialize(std::vector<uint32_t>& out) const {
  out.clear();
  append_to(out);
}

void StackSet::append_to(std::vector<uint32_t>& out) const {
  for (size_t i = 0; i < size(); ++i) {
    const auto s = (*this)[i];
    out.push_back(uint32_t(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
}

void StackSet::assign_serialized(std::span<const uint32_t> words) {
  clear();
  for (size_t i = 0; i < words.size(); i += 1 + words[i]) {  // (distinct already: no contains())
    const auto s = words.subspan(i + 1, words[i]);
    push(s, hash_of(s));
  }
}

void StackStepper::start(StackSet& out) {
  out.clear();
  for (uint32_t a : g_.alternatives(g_.root)) {
    const uint32_t s[1] = {a};
    expand(s, out);
  }
}

// Depth-first over a work list of stacks (flat, lengths alongside) so that branching at a rule
// reference copies no vectors of vectors.
void StackStepper::expand(std::span<const uint32_t> stack, StackSet& out) {
  work_.assign(stack.begin(), stack.end());
  work_len_.assign(1, uint32_t(stack.size()));
  expanded_markers_.clear();
  const uint32_t elements = uint32_t(g_.elements.size());
  while (!work_len_.empty()) {
    const uint32_t n = work_len_.back();
    work_len_.pop_back();
    cur_.assign(work_.end() - n, work_.end());
    work_.resize(work_.size() - n);
    for (;;) {
      if (cur_.empty()) {
        emit(out);
        break;
      }
      const uint32_t pos = cur_.back();
      if (pos >= elements) {  // a caller marker on top: the known frames have all returned
        if (pos == approximate_end()) emit(out);
        else if (pos == cut_marker()) cut_reached_ = true;
        else return_to_callers(pos);
        break;
      }
      const Element& e = g_.at(pos);
      if (e.kind == Element::kBytes) {
        emit(out);
        break;
      }
      cur_.pop_back();
      if (e.kind != Element::kRuleRef) continue;  // the alternative ended: return to the caller
      // Continue after the reference, unless it was the alternative's last element (a tail
      // call: repetition does not grow the stack).
      if (!g_.ends_alternative(pos + 1)) cur_.push_back(pos + 1);
      const uint32_t rule = e.value;
      const uint32_t first_alt = g_.rule_begin[rule];
      uint32_t p = first_alt;
      for (;; ++p) {  // alternatives after the first go to the work list
        const Element& x = g_.at(p);
        if (x.kind == Element::kEndOfRule) break;
        if (x.kind == Element::kEndOfAlternative) {
          work_.insert(work_.end(), cur_.begin(), cur_.end());
          work_.push_back(p + 1);
          work_len_.push_back(uint32_t(cur_.size() + 1));
        }
      }
      cur_.push_back(first_alt);
    }
  }
}

void StackStepper::emit(StackSet& out) {
  out.add(cur_);
  if (out.size() > max_stacks_)
    throw GrammarError(cat("grammar: more than ", max_stacks_, " parses are alive at once; the "
                           "grammar is too ambiguous (an optional or repeated part that can match the same text in "
                           "several ways, as in `x? x?`): rewrite it so that a text has one parse"));
}

void StackStepper::return_to_callers(uint32_t marker) {
  if (std::find(expanded_markers_.begin(), expanded_markers_.end(), marker) != expanded_markers_.end()) return;
  expanded_markers_.push_back(marker);  // (tail calls can lead back to the same marker)
  const uint32_t rules = uint32_t(g_.rule_begin.size());
  const uint32_t rule = (marker - uint32_t(g_.elements.size())) % rules;
  auto push = [&](std::initializer_list<uint32_t> s) {
    work_.insert(work_.end(), s.begin(), s.end());
    work_len_.push_back(uint32_t(s.size()));
  };
  for (uint32_t p : analysis_->callers(rule)) {
    const uint32_t caller = caller_marker(analysis_->rule_of(p), true);
    if (g_.ends_alternative(p + 1)) push({caller});
    else push({caller, p + 1});
  }
  if (rule == g_.root) push({approximate_end()});
}

bool StackStepper::same_step(const StackSet& in, uint8_t a, uint8_t b) const {
  for (size_t i = 0; i < in.size(); ++i) {
    const auto s = in[i];
    if (s.empty() || s.back() >= g_.elements.size()) continue;
    const ByteSet& set = g_.byte_sets[g_.at(s.back()).value];
    if (set.has(a) != set.has(b)) return false;
  }
  return true;
}

void StackStepper::advance(const StackSet& in, uint8_t b, StackSet& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const auto s = in[i];
    if (s.empty() || s.back() >= g_.elements.size()) continue;  // complete (or a marker): nothing takes b
    const uint32_t top = s.back();
    if (!g_.byte_sets[g_.at(top).value].has(b)) continue;
    // The byte set matched: continue at the next element of its alternative.
    seed_.assign(s.begin(), s.end());
    seed_.back() = top + 1;
    expand(seed_, out);
  }
}

}  // namespace dsv4::grammar
