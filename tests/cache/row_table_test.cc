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

}  // namespace
}  // namespace dsv4
