#include "core/workspace.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {

Workspace::~Workspace() {
  for (auto& c : chunks_) memory_.release(c.data);
}

// Chunks are kept across passes and handed out again in the same order: a pass that allocates
// what the one before it did touches the same memory, never fresh pages (a first touch of a page
// costs a fault and a clear, which on a 512-row prefill chunk was ~1.5 GB and seconds of time).
Tensor Workspace::alloc(DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  const size_t bytes = std::max<size_t>(64, (t.nbytes() + 63) / 64 * 64);
  while (current_ < chunks_.size() && chunks_[current_].used + bytes > chunks_[current_].size) ++current_;
  if (current_ == chunks_.size()) {
    const size_t size = std::max({bytes, capacity(), size_t(1) << 20});
    chunks_.push_back({memory_.allocate(size), size, 0});
  }
  Chunk& c = chunks_[current_];
  t.data = static_cast<uint8_t*>(c.data) + c.used;
  c.used += bytes;
  return t;
}

void Workspace::reset() {
  for (auto& c : chunks_) c.used = 0;
  current_ = 0;
}

Workspace::Mark Workspace::mark() const {
  return current_ < chunks_.size() ? Mark{current_, chunks_[current_].used} : Mark{current_, 0};
}

void Workspace::rewind(Mark m) {
  DSV4_CHECK(m.chunk < current_ || (m.chunk == current_ && (m.chunk == chunks_.size() || m.used <= chunks_[m.chunk].used)),
             "Workspace::rewind: the mark is past the allocations (taken before a reset?)");
  for (size_t i = m.chunk + 1; i < chunks_.size(); ++i) chunks_[i].used = 0;
  if (m.chunk < chunks_.size()) chunks_[m.chunk].used = m.used;
  current_ = m.chunk;
}

size_t Workspace::capacity() const {
  size_t total = 0;
  for (auto& c : chunks_) total += c.size;
  return total;
}

}  // namespace dsv4
