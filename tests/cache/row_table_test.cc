// Paged row tables: rows are addressable exactly between reserve (ensure_rows) and
// truncate/release, blocks go back to the pool, and a rolled-back row cannot be read.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "cache/row_pool.h"
#include "core/error.h"

namespace dsv4 {
namespace {

class HostMemory final : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void release(void* p) override { std::free(p); }
};

TEST(RowTable, TruncatedRowsCannotBeReadAndBlocksReturn) {
  HostMemory memory;
  RowPool pool(memory, DType::F32, 4, /*rows_per_block=*/8, /*blocks_per_chunk=*/4);
  RowTable t(&pool);
  t.ensure_rows(20);  // 3 blocks
  EXPECT_EQ(pool.blocks_in_use(), 3);
  EXPECT_EQ(t.size(), 20);
  for (int64_t i = 0; i < 20; ++i) reinterpret_cast<float*>(t.row(i))[0] = float(i);

  t.truncate(13);  // rows 13..19 dropped; block 2 (rows 16..23) released, block 1 kept
  EXPECT_EQ(pool.blocks_in_use(), 2);
  EXPECT_TRUE(t.has_row(12));
  EXPECT_FALSE(t.has_row(13)) << "a truncated row in a kept block must not be readable";
  EXPECT_THROW(t.row(14), Error);
  EXPECT_EQ(reinterpret_cast<float*>(t.row(12))[0], 12.0f);

  t.ensure_rows(14);  // re-extending makes the row addressable again (to be rewritten)
  EXPECT_TRUE(t.has_row(13));
  EXPECT_FALSE(t.has_row(14));

  t.release_before(9);  // block 0 (rows 0..7) is released; row 8 stays
  EXPECT_FALSE(t.has_row(7));
  EXPECT_TRUE(t.has_row(8));
  EXPECT_EQ(t.first_kept_row(), 8);
  EXPECT_EQ(pool.blocks_in_use(), 1);

  RowTable moved = std::move(t);
  EXPECT_TRUE(moved.has_row(13));
  EXPECT_FALSE(t.has_row(13));
  moved.clear();
  EXPECT_EQ(pool.blocks_in_use(), 0);
  EXPECT_FALSE(moved.has_row(8));
}

float value(const RowTable& t, int64_t i) { return reinterpret_cast<const float*>(t.row(i))[0]; }
void write(RowTable& t, int64_t from, int64_t to, float base) {
  t.ensure_rows(to);
  for (int64_t i = from; i < to; ++i) reinterpret_cast<float*>(t.row(i))[0] = base + float(i);
}

// The prefix cache's fork: full blocks shared (one more reference, no copy), the block the cut
// falls in copied, and neither holder's writes ever reach a row the other can read.
TEST(RowTable, ForksShareFullBlocksAndCopyTheOneTheCutFallsIn) {
  HostMemory memory;
  RowPool pool(memory, DType::F32, 4, /*rows_per_block=*/8, /*blocks_per_chunk=*/4);
  RowTable a(&pool);
  write(a, 0, 20, 0.0f);                    // blocks 0, 1, 2 (rows 16..19)
  RowTable b = a.fork(13);                  // blocks 0 shared, 1 (rows 8..12 of it) copied
  EXPECT_EQ(b.size(), 13);
  EXPECT_EQ(pool.blocks_in_use(), 4);
  EXPECT_EQ(b.blocks()[0], a.blocks()[0]);
  EXPECT_NE(b.blocks()[1], a.blocks()[1]);
  EXPECT_EQ(pool.references(a.blocks()[0]), 2);
  EXPECT_EQ(b.shared_blocks(), 1);
  for (int64_t i = 0; i < 13; ++i) EXPECT_EQ(value(b, i), float(i)) << i;
  EXPECT_FALSE(b.has_row(13));

  write(b, 13, 24, 100.0f);                 // b goes on with other tokens
  write(a, 20, 24, 0.0f);                   // and a with its own
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(value(a, i), float(i)) << i;
  for (int64_t i = 13; i < 24; ++i) EXPECT_EQ(value(b, i), 100.0f + float(i)) << i;

  // A read-only fork (a snapshot) shares even the block the cut falls in; a fork of it copies that block.
  RowTable snap = a.fork(10, /*writable=*/false);
  EXPECT_EQ(snap.blocks()[1], a.blocks()[1]);
  RowTable c = snap.fork(10);
  EXPECT_NE(c.blocks()[1], a.blocks()[1]);
  write(c, 10, 16, 200.0f);
  EXPECT_EQ(value(a, 10), 10.0f);
  EXPECT_EQ(value(snap, 9), 9.0f);

  // Truncating into a shared block copies it first (a rewrite must not reach the snapshot's rows).
  const int32_t shared = a.blocks()[1];
  a.truncate(9);
  EXPECT_NE(a.blocks()[1], shared);
  write(a, 9, 12, 300.0f);
  EXPECT_EQ(value(snap, 9), 9.0f);
  EXPECT_EQ(value(a, 9), 309.0f);
  EXPECT_EQ(value(a, 8), 8.0f);

  // Blocks go back when their last holder lets go, whatever the order.
  a.clear();
  EXPECT_GT(pool.blocks_in_use(), 0);
  snap.clear();
  b.clear();
  EXPECT_GT(pool.blocks_in_use(), 0);
  EXPECT_EQ(value(c, 0), 0.0f);  // block 0 still there for c
  c.clear();
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

TEST(RowTable, AForkKeepsReleasedRowsReleased) {
  HostMemory memory;
  RowPool pool(memory, DType::F32, 4, 8, 4);
  RowTable a(&pool);
  write(a, 0, 30, 0.0f);
  a.release_before(17);  // blocks 0 and 1
  RowTable b = a.fork(25);
  EXPECT_FALSE(b.has_row(15));
  EXPECT_EQ(value(b, 16), 16.0f);
  EXPECT_EQ(b.first_kept_row(), 16);
  EXPECT_THROW(a.fork(31), Error);  // beyond what it holds
  a.clear();
  b.clear();
  EXPECT_EQ(pool.blocks_in_use(), 0);
}

}  // namespace
}  // namespace dsv4
