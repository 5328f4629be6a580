#include "grammar/grammar_mask.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dsv4::grammar {

GrammarMask::GrammarMask(std::shared_ptr<const CompiledGrammar> grammar, GrammarMaskOptions options)
    : grammar_(std::move(grammar)), options_(options) {
  DSV4_CHECK(!options_.starts_in_reasoning || options_.reasoning_end >= 0,
             "grammar mask: reasoning mode needs the id of the token that ends the reasoning");
}

void GrammarMask::begin(size_t sequence, size_t prompt_tokens) {
  State& s = states_[sequence];
  s.prompt = prompt_tokens;
  s.fed.clear();
  s.failed = false;
  if (s.matcher) s.matcher->reset();
}

bool GrammarMask::grammar_part(std::span<const int32_t> output, std::span<const int32_t>& part) const {
  if (!options_.starts_in_reasoning) {
    part = output;
    return true;
  }
  const auto end = std::find(output.begin(), output.end(), options_.reasoning_end);
  if (end == output.end()) return false;
  part = output.subspan(size_t(end - output.begin()) + 1);
  return true;
}

void GrammarMask::allowed_tokens(size_t sequence, std::span<const int32_t> context, std::span<uint64_t> allowed) const {
  State& s = states_[sequence];
  if (s.prompt == SIZE_MAX) s.prompt = context.size();
  DSV4_CHECK(context.size() >= s.prompt, "grammar mask: sequence ", sequence, " has ", context.size(),
             " tokens of context, fewer than its prompt's ", s.prompt);
  const int32_t eos = grammar_->vocab().eos;
  std::span<const int32_t> part;
  if (!grammar_part(context.subspan(s.prompt), part)) {
    ++counters_.free_masks;
    std::fill(allowed.begin(), allowed.end(), ~uint64_t(0));
    if (eos >= 0 && size_t(eos) < allowed.size() * 64) allowed[size_t(eos) >> 6] &= ~(uint64_t(1) << (eos & 63));
    return;
  }
  ++counters_.masks;
  const auto start = std::chrono::steady_clock::now();
  if (!s.failed) {
    try {
      follow(s, sequence, context, part, allowed);
    } catch (const GrammarError& e) {
      if (eos < 0) throw;  // (no token to end with: the step fails)
      s.failed = true;
      if (error_.empty()) error_ = e.what();
    }
  }
  if (s.failed) {
    std::fill(allowed.begin(), allowed.end(), uint64_t(0));
    if (size_t(eos) < allowed.size() * 64) allow(allowed, size_t(eos));
  }
  counters_.record(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// Brings the sequence's matcher to `part` (the grammar's part of the context) and writes its mask.
void GrammarMask::follow(State& s, size_t sequence, std::span<const int32_t> context, std::span<const int32_t> part,
                         std::span<uint64_t> allowed) const {
  if (!s.matcher) s.matcher = std::make_unique<TokenMatcher>(grammar_);
  // Keep what the matcher holds of this context; roll back what was dropped (drafts).
  const size_t common = size_t(std::mismatch(s.fed.begin(), s.fed.end(), part.begin(), part.end()).first - s.fed.begin());
  if (common < s.fed.size()) {
    s.matcher->rollback(s.fed.size() - common);
    counters_.tokens_rolled_back += int64_t(s.fed.size() - common);
    s.fed.resize(common);
  }
  const size_t offset = context.size() - s.prompt - part.size();  // of the grammar's part in the output
  for (size_t i = common; i < part.size(); ++i) {
    DSV4_CHECK(s.matcher->accept(part[i]), "grammar mask: sequence ", sequence, " holds token ", part[i],
               " at output position ", offset + i, ", which the grammar does not allow there");
    s.fed.push_back(part[i]);
    ++counters_.tokens_fed;
  }
  const size_t words = grammar_->mask_words();
  if (allowed.size() >= words) {  // straight into the caller's bitmap (ids past the tokenizer's: none)
    s.matcher->fill_mask(allowed.first(words));
    std::fill(allowed.begin() + ptrdiff_t(words), allowed.end(), uint64_t(0));
  } else {
    bits_.resize(words);
    s.matcher->fill_mask(bits_);
    std::copy_n(bits_.begin(), allowed.size(), allowed.begin());
  }
}

void GrammarMask::Counters::record(double s) {
  seconds += s;
  max_seconds = std::max(max_seconds, s);
  const double b = std::ceil(4 * std::log2(std::max(s * 1e6, 1.0)));
  ++histogram[size_t(std::min(b, double(kBuckets - 1)))];
}

double GrammarMask::Counters::percentile_us(double p) const {
  int64_t total = 0;
  for (int64_t n : histogram) total += n;
  int64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += histogram[i];
    if (seen > 0 && double(seen) >= p * double(total)) return std::exp2(double(i) / 4);
  }
  return 0;
}

bool GrammarMask::complete(std::span<const int32_t> output) const {
  std::span<const int32_t> part;
  if (!grammar_part(output, part)) return false;
  TokenMatcher m(grammar_);
  for (int32_t t : part)
    if (!m.accept(t)) return false;
  return m.complete() || m.finished();
}

}  // namespace dsv4::grammar
