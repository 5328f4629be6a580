// Paged storage of per-position rows (KV rows, compressor state, compressed entries).
//
// A RowPool hands out fixed-size blocks of `rows_per_block` rows from large chunks of
// backend memory; many sequences share one pool without fragmentation. A RowTable is
// one sequence's block table: row i lives in block i / rows_per_block. Rows are
// addressed by position, never overwritten by later positions, so rolling back is
// releasing the blocks past the new end (and rows that rejected drafts wrote are gone
// with them), and rows that fall out of the attention window are released from the front.
//
// Blocks are reference-counted so that sequences can share a prefix (the prefix cache): a fork
// holds the source's full blocks below the cut and copies the block the cut falls in, so no
// holder ever writes a row another holder can read. Rows are written only past a table's end;
// a truncation that would leave the table writing into a block it shares copies that block
// first (copy on write).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/device_memory.h"
#include "core/dtype.h"

namespace dsv4 {

class RowPool {
 public:
  RowPool(DeviceMemory& memory, DType dtype, int64_t row_elems, int64_t rows_per_block = 64,
          int64_t blocks_per_chunk = 64);
  ~RowPool();
  RowPool(const RowPool&) = delete;
  RowPool& operator=(const RowPool&) = delete;

  DType dtype() const { return dtype_; }
  int64_t row_elems() const { return row_elems_; }
  int64_t rows_per_block() const { return rows_per_block_; }
  size_t row_bytes() const { return size_t(row_elems_) * dtype_size(dtype_); }
  size_t block_bytes() const { return row_bytes() * size_t(rows_per_block_); }

  int32_t allocate_block();           // one reference
  void retain_block(int32_t block);    // one more
  void release_block(int32_t block);   // one fewer; free at none
  int32_t references(int32_t block) const { return refs_[size_t(block)]; }
  uint8_t* block_data(int32_t block) const;

  int64_t blocks_in_use() const { return blocks_in_use_; }
  int64_t blocks_allocated() const { return int64_t(chunks_.size()) * blocks_per_chunk_; }

 private:
  DeviceMemory& memory_;
  DType dtype_;
  int64_t row_elems_, rows_per_block_, blocks_per_chunk_;
  std::vector<uint8_t*> chunks_;
  std::vector<int32_t> free_blocks_;
  std::vector<int32_t> refs_;  // per block
  int64_t blocks_in_use_ = 0;
};

class RowTable {
 public:
  RowTable() = default;
  explicit RowTable(RowPool* pool) : pool_(pool) {}
  RowTable(RowTable&& other) noexcept;
  RowTable& operator=(RowTable&& other) noexcept;
  RowTable(const RowTable&) = delete;
  RowTable& operator=(const RowTable&) = delete;
  ~RowTable() { clear(); }

  bool attached() const { return pool_ != nullptr; }
  const RowPool& pool() const { return *pool_; }

  // A table holding rows [0, rows) of this one (rows <= size()): the blocks wholly below `rows`
  // shared, the block `rows` falls in copied (or shared too when `writable` is false: a
  // snapshot that is only ever read or forked again). Released rows stay released.
  RowTable fork(int64_t rows, bool writable = true) const;

  void ensure_rows(int64_t rows);     // rows [0, rows) become addressable
  // Rows >= rows become unaddressable (reading one throws) and blocks holding only such
  // rows are released: a rollback that drops a row still needed fails loudly.
  void truncate(int64_t rows);
  void release_before(int64_t row);   // release blocks holding only rows < row
  // Rows below `row` will never be read (nor rows [size(), row) written): blocks holding only such
  // rows are released, and those not allocated yet never are. A table that jumps ahead (a long
  // prompt's rows that no later row reads).
  void skip_to(int64_t row);
  void clear();

  bool has_row(int64_t i) const;
  uint8_t* row(int64_t i) const;      // throws Error if the row was released, truncated or never reserved
  int64_t shared_blocks() const;      // blocks another table holds too
  int64_t bytes_held() const;         // of the blocks it holds (shared ones included)
  int64_t size() const { return rows_; }  // rows [0, size) were reserved and not truncated
  int64_t first_kept_row() const;     // lowest addressable row

  // For device backends: the block numbers (-1 = released) of rows 0.. in order.
  const std::vector<int32_t>& blocks() const { return blocks_; }

 private:
  // Makes the block holding row `rows_` (the next one written) this table's own.
  void own_tail();

  RowPool* pool_ = nullptr;
  std::vector<int32_t> blocks_;
  int64_t rows_ = 0;             // addressable rows end here
  int64_t released_prefix_ = 0;  // blocks [0, released_prefix_) are released
};

}  // namespace dsv4
