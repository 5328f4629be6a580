#pragma once
// A hash of a vector of words (stack sets, bitmaps) for unordered containers: FNV-1a.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsv4::grammar {

struct WordsHash {
  template <typename Word>
  size_t operator()(const std::vector<Word>& words) const {
    uint64_t h = 1469598103934665603ull;
    for (Word w : words) h = (h ^ uint64_t(w)) * 1099511628211ull;
    return size_t(h);
  }
};

}  // namespace dsv4::grammar
