#include "cache/row_pool.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace dsv4 {

RowPool::RowPool(DeviceMemory& memory, DType dtype, int64_t row_elems, int64_t rows_per_block,
                 int64_t blocks_per_chunk)
    : memory_(memory), dtype_(dtype), row_elems_(row_elems), rows_per_block_(rows_per_block),
      blocks_per_chunk_(blocks_per_chunk) {
  DSV4_CHECK(row_elems > 0 && rows_per_block > 0 && blocks_per_chunk > 0, "RowPool: bad geometry");
}

RowPool::~RowPool() {
  for (uint8_t* c : chunks_) memory_.release(c);
}

int32_t RowPool::allocate_block() {
  if (free_blocks_.empty()) {
    const int32_t first = int32_t(chunks_.size() * size_t(blocks_per_chunk_));
    chunks_.push_back(static_cast<uint8_t*>(memory_.allocate(block_bytes() * size_t(blocks_per_chunk_))));
    for (int64_t b = blocks_per_chunk_ - 1; b >= 0; --b) free_blocks_.push_back(first + int32_t(b));
    refs_.resize(refs_.size() + size_t(blocks_per_chunk_), 0);
  }
  int32_t b = free_blocks_.back();
  free_blocks_.pop_back();
  refs_[size_t(b)] = 1;
  ++blocks_in_use_;
  return b;
}

void RowPool::retain_block(int32_t block) {
  DSV4_CHECK(block >= 0 && size_t(block) < refs_.size() && refs_[size_t(block)] > 0, "RowPool: retain of free block ",
             block);
  ++refs_[size_t(block)];
}

void RowPool::release_block(int32_t block) {
  DSV4_CHECK(block >= 0 && size_t(block) < refs_.size() && refs_[size_t(block)] > 0, "RowPool: release of free block ",
             block);
  if (--refs_[size_t(block)] > 0) return;
  free_blocks_.push_back(block);
  --blocks_in_use_;
}

uint8_t* RowPool::block_data(int32_t block) const {
  return chunks_[size_t(block / blocks_per_chunk_)] + size_t(block % blocks_per_chunk_) * block_bytes();
}

RowTable::RowTable(RowTable&& o) noexcept
    : pool_(o.pool_), blocks_(std::move(o.blocks_)), rows_(o.rows_), released_prefix_(o.released_prefix_) {
  o.pool_ = nullptr;
  o.blocks_.clear();
  o.rows_ = 0;
  o.released_prefix_ = 0;
}

RowTable& RowTable::operator=(RowTable&& o) noexcept {
  if (this != &o) {
    clear();
    pool_ = o.pool_;
    blocks_ = std::move(o.blocks_);
    rows_ = o.rows_;
    released_prefix_ = o.released_prefix_;
    o.pool_ = nullptr;
    o.blocks_.clear();
    o.rows_ = 0;
    o.released_prefix_ = 0;
  }
  return *this;
}

RowTable RowTable::fork(int64_t rows, bool writable) const {
  DSV4_CHECK(pool_ && rows >= 0 && rows <= rows_, "cache fork at row ", rows, " of a table holding ", rows_);
  RowTable t(pool_);
  const int64_t per = pool_->rows_per_block(), n = (rows + per - 1) / per;
  t.blocks_.assign(blocks_.begin(), blocks_.begin() + n);
  for (int32_t b : t.blocks_)
    if (b >= 0) pool_->retain_block(b);
  t.rows_ = rows;
  t.released_prefix_ = std::min(released_prefix_, n);
  if (writable) t.own_tail();
  return t;
}

void RowTable::own_tail() {
  const int64_t per = pool_->rows_per_block(), b = rows_ / per, used = rows_ % per;
  if (used == 0 || b >= int64_t(blocks_.size())) return;  // the next row starts a block of its own
  int32_t& block = blocks_[size_t(b)];
  if (block < 0) {  // released: the rows written next need a block (the released ones stay unread)
    block = pool_->allocate_block();
    return;
  }
  if (pool_->references(block) == 1) return;
  const int32_t copy = pool_->allocate_block();
  std::memcpy(pool_->block_data(copy), pool_->block_data(block), size_t(used) * pool_->row_bytes());
  pool_->release_block(block);
  block = copy;
}

int64_t RowTable::bytes_held() const {
  if (!pool_) return 0;
  return int64_t(pool_->block_bytes()) * std::count_if(blocks_.begin(), blocks_.end(), [](int32_t b) { return b >= 0; });
}

int64_t RowTable::shared_blocks() const {
  if (!pool_) return 0;
  return std::count_if(blocks_.begin(), blocks_.end(), [&](int32_t b) { return b >= 0 && pool_->references(b) > 1; });
}

void RowTable::ensure_rows(int64_t rows) {
  const int64_t need = (rows + pool_->rows_per_block() - 1) / pool_->rows_per_block();
  while (int64_t(blocks_.size()) < need) blocks_.push_back(pool_->allocate_block());
  rows_ = std::max(rows_, rows);
}

void RowTable::truncate(int64_t rows) {
  rows_ = std::min(rows_, rows);
  const int64_t keep = (rows + pool_->rows_per_block() - 1) / pool_->rows_per_block();
  while (int64_t(blocks_.size()) > keep) {
    if (blocks_.back() >= 0) pool_->release_block(blocks_.back());
    blocks_.pop_back();
  }
  if (released_prefix_ > int64_t(blocks_.size())) released_prefix_ = int64_t(blocks_.size());
  own_tail();  // rows past the end will be written again: not into a block a fork reads
}

void RowTable::release_before(int64_t row) {
  const int64_t upto = std::min<int64_t>(row / pool_->rows_per_block(), int64_t(blocks_.size()));
  for (; released_prefix_ < upto; ++released_prefix_) {
    int32_t& b = blocks_[size_t(released_prefix_)];
    if (b >= 0) pool_->release_block(b);
    b = -1;
  }
}

void RowTable::skip_to(int64_t row) {
  release_before(row);
  const int64_t below = row / pool_->rows_per_block();  // blocks holding only rows < row
  while (int64_t(blocks_.size()) < below) blocks_.push_back(-1);
  released_prefix_ = std::max(released_prefix_, below);
  rows_ = std::max(rows_, row);
}

void RowTable::clear() {
  if (!pool_) return;
  for (int32_t b : blocks_)
    if (b >= 0) pool_->release_block(b);
  blocks_.clear();
  rows_ = 0;
  released_prefix_ = 0;
}

bool RowTable::has_row(int64_t i) const {
  if (!pool_ || i < 0 || i >= rows_) return false;
  const int64_t b = i / pool_->rows_per_block();
  return b < int64_t(blocks_.size()) && blocks_[size_t(b)] >= 0;
}

uint8_t* RowTable::row(int64_t i) const {
  DSV4_CHECK(has_row(i), "cache row ", i, " is not available (released or never written)");
  const int64_t b = i / pool_->rows_per_block();
  return pool_->block_data(blocks_[size_t(b)]) + size_t(i % pool_->rows_per_block()) * pool_->row_bytes();
}

int64_t RowTable::first_kept_row() const { return released_prefix_ * (pool_ ? pool_->rows_per_block() : 0); }

}  // namespace dsv4
