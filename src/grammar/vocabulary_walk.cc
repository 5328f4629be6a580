#include "grammar/vocabulary_walk.h"

#include <algorithm>

namespace dsv4::grammar {

SortedVocabulary sort_vocabulary(const TokenVocabulary& v) {
  SortedVocabulary s;
  for (int32_t id = 0; id < v.size(); ++id)
    if (!v.special[size_t(id)] && !v.bytes[size_t(id)].empty()) s.ids.push_back(id);
  std::sort(s.ids.begin(), s.ids.end(), [&](int32_t a, int32_t b) { return v.bytes[size_t(a)] < v.bytes[size_t(b)]; });
  s.lcp.resize(s.ids.size(), 0);
  for (size_t i = 1; i < s.ids.size(); ++i) {
    const std::string& a = v.bytes[size_t(s.ids[i - 1])];
    const std::string& b = v.bytes[size_t(s.ids[i])];
    uint32_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    s.lcp[i] = n;
  }
  for (int32_t id : s.ids) s.max_length = std::max(s.max_length, v.bytes[size_t(id)].size());
  const size_t n = s.ids.size();
  for (size_t d = 1; d <= SortedVocabulary::kSkipDepths; ++d) {
    std::vector<uint32_t>& end = s.subtree_end[d - 1];
    end.assign(n, uint32_t(n));
    for (size_t i = n; i-- > 1;) end[i - 1] = s.lcp[i] < d ? uint32_t(i) : end[i];
  }
  return s;
}

VocabularyWalker::VocabularyWalker(const Grammar& g, const GrammarAnalysis* analysis, const TokenVocabulary& v,
                                   const SortedVocabulary& sorted, size_t max_states)
    : step_(g), automaton_(step_, max_states), approximate_(analysis != nullptr), vocab_(v), sorted_(sorted),
      states_(sorted.max_length + 1, StackAutomaton::kDead) {
  step_.over_approximate(analysis);
}

}  // namespace dsv4::grammar
