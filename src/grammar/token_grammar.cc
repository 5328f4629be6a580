#include "grammar/token_grammar.h"

#include "grammar/grammar_analysis.h"
#include "grammar/vocabulary_walk.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <numeric>
#include <thread>

namespace dsv4::grammar {

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenVocabulary> vocab, int threads)
    : grammar_(std::move(g)), vocab_(std::move(vocab)) {
  const auto t0 = std::chrono::steady_clock::now();
  DSV4_CHECK(vocab_ && vocab_->special.size() == vocab_->bytes.size(), "grammar: vocabulary without special flags");
  DSV4_CHECK(vocab_->eos < vocab_->size(), "grammar: EOS id ", vocab_->eos, " outside the vocabulary");
  words_ = (size_t(vocab_->size()) + 63) / 64;
  top_index_.assign(grammar_.elements.size(), 0);
  std::vector<uint32_t> tops;
  for (uint32_t p = 0; p < grammar_.elements.size(); ++p)
    if (grammar_.elements[p].kind == Element::kBytes) {
      top_index_[p] = uint32_t(tops.size());
      tops.push_back(p);
    }
  tops_.resize(tops.size());
  sorted_ = std::make_shared<SortedVocabulary>(sort_vocabulary(*vocab_));
  const GrammarAnalysis analysis(grammar_);
  const int n = std::max(1, std::min<int>(threads > 0 ? threads : int(std::thread::hardware_concurrency()),
                                          int(tops.size())));
  std::atomic<size_t> next{0};
  std::mutex bitmaps_mutex;
  std::unordered_map<std::vector<uint64_t>, const std::vector<uint64_t>*, WordsHash> distinct;
  auto walk_tops = [&] {
    VocabularyWalker walker(grammar_, &analysis, *vocab_, *sorted_);
    std::vector<uint32_t> start;
    std::vector<uint64_t> bits(words_);
    for (size_t i; (i = next.fetch_add(1)) < tops.size();) {
      // The stack every parse with this top holds: the known frames below it, and below those
      // a marker for the unknown callers (none when the frames reach the root).
      const TopContext context = analysis.context_of(tops[i]);
      start.clear();
      if (!context.bottom_is_root) start.push_back(StackStepper(grammar_).caller_marker(context.bottom_rule, false));
      start.insert(start.end(), context.frames.begin(), context.frames.end());
      start.push_back(tops[i]);
      AtTop& out = tops_[i];
      walker.walk(start, [&](int32_t id, bool exact) {
        if (exact) out.accepted_ids.push_back(id);
        else out.uncertain.push_back(id);  // only through some caller: check the real stack
      });
      if (out.accepted_ids.size() < kListBelow) {
        std::sort(out.accepted_ids.begin(), out.accepted_ids.end());  // (walked in byte order)
        out.accepted_ids.shrink_to_fit();
        continue;
      }
      std::fill(bits.begin(), bits.end(), 0);
      for (int32_t id : out.accepted_ids) bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
      std::vector<int32_t>().swap(out.accepted_ids);  // (`= {}` would keep the capacity)
      std::lock_guard<std::mutex> lock(bitmaps_mutex);
      auto [it, added] = distinct.try_emplace(bits, nullptr);
      if (added) {
        bitmaps_.push_back(std::make_unique<std::vector<uint64_t>>(bits));
        it->second = bitmaps_.back().get();
      }
      out.accepted_bits = it->second;
    }
  };
  std::exception_ptr failure;  // the first worker's error (too ambiguous), thrown once all have stopped
  auto work = [&] {
    try {
      walk_tops();
    } catch (...) {
      std::lock_guard<std::mutex> lock(bitmaps_mutex);
      if (!failure) failure = std::current_exception();
      next = tops.size();  // the others stop at their next top
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  // The mask cache's table, sized once (its masks are allocated as they are first needed).
  cache_.reserve(kMaxCachedMasks);
  cache_slab_.reset(new uint64_t[kMaxCachedMasks * words_]());  // (zeroed: its pages are touched now, not by a mask)
  cache_slot_key_.assign(kMaxCachedMasks, nullptr);
  compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool CompiledGrammar::cached_mask(const std::vector<uint32_t>& key, std::span<uint64_t> bits) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) return false;
  const uint64_t* mask = cache_slab_.get() + size_t(it->second) * words_;
  std::copy(mask, mask + words_, bits.begin());
  return true;
}

void CompiledGrammar::cache_mask(const std::vector<uint32_t>& key, std::span<const uint64_t> bits) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.contains(key)) return;  // (another sequence cached it meanwhile)
  const uint32_t slot = cache_next_slot_;
  cache_next_slot_ = uint32_t((cache_next_slot_ + 1) % kMaxCachedMasks);
  ++cache_stores_;
  if (const std::vector<uint32_t>* old = cache_slot_key_[slot]) {
    // The oldest entry's node becomes the new one: its key buffer is reused, so a full cache
    // allocates nothing.
    auto node = cache_.extract(cache_.find(*old));
    node.key().assign(key.begin(), key.end());
    node.mapped() = slot;
    cache_slot_key_[slot] = &cache_.insert(std::move(node)).position->first;
  } else {
    cache_slot_key_[slot] = &cache_.try_emplace(key, slot).first->first;  // (node-based map: the key stays put)
  }
  std::copy(bits.begin(), bits.end(), cache_slab_.get() + size_t(slot) * words_);
}

int64_t CompiledGrammar::masks_cached() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return cache_stores_;
}

size_t CompiledGrammar::memory_bytes() const {
  size_t n = bitmaps_.size() * words_ * 8 + tops_.size() * sizeof(AtTop);
  for (const AtTop& t : tops_) n += (t.accepted_ids.capacity() + t.uncertain.capacity()) * 4;
  return n;
}

size_t CompiledGrammar::uncertain_total() const {
  size_t n = 0;
  for (const AtTop& t : tops_) n += t.uncertain.size();
  return n;
}

TokenMatcher::TokenMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      step_(grammar_->grammar()),
      walker_(std::make_unique<VocabularyWalker>(grammar_->grammar(), nullptr, grammar_->vocab(),
                                                 grammar_->sorted_vocabulary(), kMaxAutomatonStates)) {
  ended_.assign(1, 0);
  step_.start(current_);
  saved_at_.assign(1, 0);
  current_.append_to(saved_);
  saved_at_.push_back(saved_.size());
}

TokenMatcher::~TokenMatcher() = default;

bool TokenMatcher::advance_bytes(const StackSet& from, const std::string& bytes, StackSet& to) {
  const size_t n = bytes.size();
  if (n == 1) {
    step_.advance(from, static_cast<uint8_t>(bytes[0]), to);
    return !to.empty();
  }
  step_.advance(from, static_cast<uint8_t>(bytes[0]), scratch_a_);
  for (size_t i = 1; i + 1 < n && !scratch_a_.empty(); ++i) {
    step_.advance(scratch_a_, static_cast<uint8_t>(bytes[i]), scratch_b_);
    std::swap(scratch_a_, scratch_b_);
  }
  if (scratch_a_.empty()) return false;
  step_.advance(scratch_a_, static_cast<uint8_t>(bytes[n - 1]), to);
  return !to.empty();
}

bool TokenMatcher::allows(int32_t token) {
  const TokenVocabulary& v = grammar_->vocab();
  if (token < 0 || token >= v.size()) return false;
  if (token == v.eos) return ended_[depth_] || complete();
  if (ended_[depth_]) return false;
  if (v.special[size_t(token)] || v.bytes[size_t(token)].empty()) return false;
  return advance_bytes(current_, v.bytes[size_t(token)], next_);
}

bool TokenMatcher::accept(int32_t token) {
  const TokenVocabulary& v = grammar_->vocab();
  if (!allows(token)) return false;  // (the stacks after it are in next_)
  if (ended_.size() < depth_ + 2) ended_.resize(depth_ + 2);
  if (token == v.eos) next_.clear();  // nothing follows EOS
  ended_[depth_ + 1] = token == v.eos;
  ++depth_;
  std::swap(current_, next_);
  current_.append_to(saved_);
  saved_at_.push_back(saved_.size());
  return true;
}

void TokenMatcher::rollback(size_t n) {
  DSV4_CHECK(n <= depth_, "grammar: rollback of ", n, " tokens, only ", depth_, " accepted");
  if (n == 0) return;
  depth_ -= n;
  saved_at_.resize(depth_ + 2);
  saved_.resize(saved_at_[depth_ + 1]);
  current_.assign_serialized(std::span<const uint32_t>(saved_).subspan(saved_at_[depth_]));
}

bool TokenMatcher::complete() const { return !ended_[depth_] && current().has_empty(); }

bool TokenMatcher::finished() const {
  if (ended_[depth_]) return true;
  const StackSet& s = current();
  for (size_t i = 0; i < s.size(); ++i)
    if (!s[i].empty()) return false;
  return true;
}

namespace {

// bits = the OR of `sets` (zero when none), in one pass over the words.
void or_bitmaps(std::span<const std::vector<uint64_t>* const> sets, std::span<uint64_t> bits) {
  size_t i = 0;
  if (sets.empty()) std::fill(bits.begin(), bits.end(), 0);
  for (; i < sets.size(); i += 4) {  // four sources per pass
    const uint64_t* a = sets[i]->data();
    const uint64_t* b = i + 1 < sets.size() ? sets[i + 1]->data() : a;
    const uint64_t* c = i + 2 < sets.size() ? sets[i + 2]->data() : a;
    const uint64_t* d = i + 3 < sets.size() ? sets[i + 3]->data() : a;
    if (i == 0)
      for (size_t w = 0; w < bits.size(); ++w) bits[w] = a[w] | b[w] | c[w] | d[w];
    else
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= a[w] | b[w] | c[w] | d[w];
  }
}

}  // namespace

// The uncertain tokens of a top are few and share prefixes (`",`, `"}`, `"]`): stepping them
// over the stack in byte order, each prefix's stacks kept for the tokens after it, costs less
// than interning automaton states that the next mask (another stack) would not meet. Prefixes
// are shared up to byte equivalence: a step's result depends only on which stacks' byte sets
// hold the byte, so `a"` and `b"` inside a string share the stacks after their first byte.
void TokenMatcher::check_uncertain(std::span<const uint32_t> stack, std::span<const int32_t> tokens,
                                   std::span<uint64_t> bits) {
  const TokenVocabulary& v = grammar_->vocab();
  if (prefix_sets_.empty()) prefix_sets_.resize(1);
  prefix_sets_[0].clear();
  prefix_sets_[0].add(stack);
  std::string_view previous;
  size_t valid = 0;  // prefix_sets_[0..valid]: the stacks after the first bytes of `previous`
  for (int32_t u : tokens) {
    if (is_allowed(bits, size_t(u))) continue;  // (another stack took it)
    const std::string& t = v.bytes[size_t(u)];
    const size_t shared = std::min({valid, previous.size(), t.size()});
    size_t d = 0;
    while (d < shared && (previous[d] == t[d] || step_.same_step(prefix_sets_[d], uint8_t(previous[d]), uint8_t(t[d])))) ++d;
    if (prefix_sets_.size() < t.size() + 1) prefix_sets_.resize(t.size() + 1);
    for (; d < t.size() && !prefix_sets_[d].empty(); ++d)
      step_.advance(prefix_sets_[d], static_cast<uint8_t>(t[d]), prefix_sets_[d + 1]);
    previous = t;
    valid = d;
    if (d == t.size() && !prefix_sets_[d].empty()) allow(bits, size_t(u));
  }
}

void TokenMatcher::fill_mask(std::span<uint64_t> bits) {
  const CompiledGrammar& g = *grammar_;
  const TokenVocabulary& v = g.vocab();
  DSV4_CHECK(bits.size() == g.mask_words(), "grammar: mask of ", bits.size(), " words, vocabulary needs ", g.mask_words());
  if (ended_[depth_]) {  // only EOS again: a verification row after a drafted EOS needs some token
    std::fill(bits.begin(), bits.end(), 0);
    if (v.eos >= 0) allow(bits, size_t(v.eos));
    return;
  }
  // A mask depends on each stack's top (its accepted tokens) and, where the top has uncertain
  // tokens, on the frames below that their steps reach: rarely far. So the stacks are first cut
  // to their top entries (the same object at another depth of a recursion then is one cache
  // entry), and the mask of the cut stacks stands for the full ones when no step reached the cut.
  const StackSet& s = current();
  const bool cuttable = cut_stacks(s, cut_);
  if (cuttable) {
    cut_.serialize(key_);
    key_.push_back(kCutKeyTag);
    if (g.cached_mask(key_, bits)) {
      stats_.cut_cached += cut_any_;
      return;
    }
  }
  // Full keys hold the masks of states whose cut stacks were not enough; when no checked stack
  // was cut (cut_any_ false), no step can reach a cut and the cut key is the whole story.
  if (!cuttable || cut_any_) {
    s.serialize(full_key_);
    if (g.cached_mask(full_key_, bits)) return;
  }
  if (cuttable) {
    step_.clear_cut_reached();
    compute_mask(cut_, bits);
    if (!step_.cut_reached()) {
      stats_.cut_computed += cut_any_;
      return g.cache_mask(key_, bits);
    }
    DSV4_CHECK(cut_any_, "grammar: a step reached a cut below a stack that was not cut");
    ++stats_.cut_reached;
  }
  compute_mask(s, bits);
  g.cache_mask(full_key_, bits);
}

// Each stack cut to its top entry, or to its top kCutDepth entries where the top has uncertain
// tokens (below the cut: cut_marker()). False when a stack will be walked (walk_above_).
bool TokenMatcher::cut_stacks(const StackSet& s, StackSet& out) {
  const CompiledGrammar& g = *grammar_;
  out.clear();
  cut_any_ = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto stack = s[i];
    if (stack.empty()) {
      out.add(stack);
      continue;
    }
    const size_t uncertain = g.at_top(stack.back()).uncertain.size();
    if (uncertain > walk_above_) return false;
    const size_t keep = uncertain ? kCutDepth : 1;
    if (stack.size() <= keep) {
      out.add(stack);
      continue;
    }
    cut_any_ |= uncertain > 0;
    cut_buffer_.assign(1, step_.cut_marker());
    cut_buffer_.insert(cut_buffer_.end(), stack.end() - keep, stack.end());
    out.add(cut_buffer_);
  }
  return true;
}

// The union over the stacks of `s`: each distinct top's accepted set (the large ones are shared
// bitmaps: OR-ed in one pass), then its uncertain tokens checked against the stack itself.
void TokenMatcher::compute_mask(const StackSet& s, std::span<uint64_t> bits) {
  const CompiledGrammar& g = *grammar_;
  const TokenVocabulary& v = g.vocab();
  seen_tops_.clear();
  seen_bitmaps_.clear();
  to_walk_.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    const auto stack = s[i];
    if (stack.empty() || std::find(seen_tops_.begin(), seen_tops_.end(), stack.back()) != seen_tops_.end()) continue;
    seen_tops_.push_back(stack.back());
    const std::vector<uint64_t>* b = g.at_top(stack.back()).accepted_bits;
    if (b && std::find(seen_bitmaps_.begin(), seen_bitmaps_.end(), b) == seen_bitmaps_.end()) seen_bitmaps_.push_back(b);
  }
  or_bitmaps(seen_bitmaps_, bits);
  for (uint32_t top : seen_tops_)
    for (int32_t id : g.at_top(top).accepted_ids) allow(bits, size_t(id));
  for (size_t i = 0; i < s.size(); ++i) {
    const auto stack = s[i];
    if (stack.empty()) {
      if (v.eos >= 0) allow(bits, size_t(v.eos));
      continue;
    }
    const CompiledGrammar::AtTop& at = g.at_top(stack.back());
    if (at.uncertain.size() > walk_above_) to_walk_.add(stack);  // walked below, with the other such stacks
    else if (!at.uncertain.empty()) check_uncertain(stack, at.uncertain, bits);
  }
  if (!to_walk_.empty()) {
    walker_->walk(to_walk_, [&](int32_t id, bool) { allow(bits, size_t(id)); });
  }
}

}  // namespace dsv4::grammar
