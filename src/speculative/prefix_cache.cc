#include "speculative/prefix_cache.h"

#include <algorithm>

namespace dsv4 {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return int64_t(ia - a.begin());
}

int64_t usable_cut(std::span<const int32_t> tokens, int64_t length, int64_t min_length,
                   std::span<const int32_t> prompt) {
  if (prompt.empty()) return 0;
  const int64_t shared = common_prefix(prompt, tokens);
  const int64_t cut = std::min<int64_t>({shared - 1, length, int64_t(prompt.size()) - 1});
  return cut > 0 && cut >= min_length ? cut : 0;
}

namespace {
int64_t source_cut(const PrefixSource& s, std::span<const int32_t> prompt) {
  return s.cache ? usable_cut(s.tokens, s.cache->length(), s.cache->min_truncate_length(), prompt) : 0;
}
}  // namespace

PrefixCache::Match PrefixCache::find(std::span<const int32_t> prompt, std::span<const PrefixSource> live) {
  Match best;
  auto best_entry = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const PrefixSource s{it->tokens, it->cache.get(), it->draft.get()};
    const int64_t cut = source_cut(s, prompt);
    if (cut > best.cut) {
      best = {s, cut, -1};
      best_entry = it;
    }
  }
  for (size_t i = 0; i < live.size(); ++i) {
    const int64_t cut = source_cut(live[i], prompt);
    if (cut > best.cut) {
      best = {live[i], cut, int64_t(i)};
      best_entry = entries_.end();
    }
  }
  if (best_entry != entries_.end()) entries_.splice(entries_.begin(), entries_, best_entry);  // used now
  return best;
}

void PrefixCache::insert(SequenceState state) {
  if (!state.cache || state.tokens.empty()) return;
  // An entry whose tokens begin the new one's, and which keeps no length the new one does not,
  // has nothing left to give: the new one serves every cut it served.
  entries_.remove_if([&](const SequenceState& e) {
    return e.tokens.size() <= state.tokens.size() &&
           std::equal(e.tokens.begin(), e.tokens.end(), state.tokens.begin()) &&
           state.cache->min_truncate_length() <= e.cache->min_truncate_length() && (e.draft == nullptr) == (state.draft == nullptr);
  });
  entries_.push_front(std::move(state));
}

SequenceState PrefixCache::take_oldest() {
  if (entries_.empty()) return {};
  SequenceState s = std::move(entries_.back());
  entries_.pop_back();
  return s;
}

}  // namespace dsv4
