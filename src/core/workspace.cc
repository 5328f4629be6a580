#include "core/workspace.h"

#include <algorithm>

namespace dsv4 {

Workspace::~Workspace() {
  for (auto& c : chunks_) memory_.release(c.data);
}

Tensor Workspace::alloc(DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  const size_t bytes = std::max<size_t>(64, (t.nbytes() + 63) / 64 * 64);
  if (chunks_.empty() || chunks_.back().used + bytes > chunks_.back().size) {
    const size_t previous = chunks_.empty() ? 0 : chunks_.back().size;
    const size_t size = std::max({bytes, previous * 2, size_t(1) << 20});
    chunks_.push_back({memory_.allocate(size), size, 0});
  }
  Chunk& c = chunks_.back();
  t.data = static_cast<uint8_t*>(c.data) + c.used;
  c.used += bytes;
  return t;
}

void Workspace::reset() {
  if (chunks_.size() > 1) {  // consolidate into one chunk large enough for the whole pass
    size_t total = 0;
    for (auto& c : chunks_) {
      total += c.size;
      memory_.release(c.data);
    }
    chunks_.clear();
    chunks_.push_back({memory_.allocate(total), total, 0});
  }
  for (auto& c : chunks_) c.used = 0;
}

size_t Workspace::capacity() const {
  size_t total = 0;
  for (auto& c : chunks_) total += c.size;
  return total;
}

}  // namespace dsv4
