#include "speculative/prefix_cache.h"

#include <algorithm>

namespace dsv4 {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return int64_t(ia - a.begin());
}

namespace {
// The cut a state gives `prompt` (prefix_cache.h), none when the state no longer holds the rows of
// that length.
int64_t usable_cut(const PrefixSource& s, std::span<const int32_t> prompt) {
  if (!s.cache || prompt.empty()) return 0;
  const int64_t shared = common_prefix(prompt, s.tokens);
  const int64_t cut = std::min<int64_t>({shared - 1, s.cache->length(), int64_t(prompt.size()) - 1});
  return cut > 0 && cut >= s.cache->min_truncate_length() ? cut : 0;
}
}  // namespace

PrefixCache::Match PrefixCache::find(std::span<const int32_t> prompt, std::span<const PrefixSource> live) {
  Match best;
  auto best_entry = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const PrefixSource s{it->tokens, it->cache.get(), it->draft.get()};
    const int64_t cut = usable_cut(s, prompt);
    if (cut > best.cut) {
      best = {s, cut, -1};
      best_entry = it;
    }
  }
  for (size_t i = 0; i < live.size(); ++i) {
    const int64_t cut = usable_cut(live[i], prompt);
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

bool PrefixCache::evict_oldest() {
  if (entries_.empty()) return false;
  entries_.pop_back();
  return true;
}

int64_t PrefixCache::tokens() const {
  int64_t n = 0;
  for (const SequenceState& e : entries_) n += int64_t(e.tokens.size());
  return n;
}

}  // namespace dsv4
