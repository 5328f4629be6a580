// SequenceCache::fork, the prefix cache's cut: a fork at length L holds exactly the state after L
// tokens — every table's rows of positions (or compressed entries) below L, no row more, no row
// fewer — with the source's values, and a source that keeps every row can be cut at any length.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cache/sequence_cache.h"
#include "core/error.h"

namespace dsv4 {
namespace sequence_fork {

class HostMemory final : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void release(void* p) override { std::free(p); }
};

// Window 8; a window-only layer, a ratio-4 layer with an indexer, a ratio-16 layer.
std::vector<LayerCacheGeometry> geometry() {
  LayerCacheGeometry w{4, 8, 0, 0, 0, 0}, csa{4, 8, 4, 16, 2, 8}, hca{4, 8, 16, 8, 0, 0};
  return {w, csa, hca};
}

std::vector<RowTable*> tables(LayerCache& c) { return {&c.kv, &c.state, &c.entries, &c.index_state, &c.index_keys}; }

// Every row's first element encodes (table, row) in whatever type the table holds (bf16: small integers are exact).
float tag(size_t table, int64_t row) { return float(table * 1000 + size_t(row)); }
void put(RowTable& t, size_t table, int64_t row) {
  if (t.pool().dtype() == DType::F32) reinterpret_cast<float*>(t.row(row))[0] = tag(table, row);
  else reinterpret_cast<uint16_t*>(t.row(row))[0] = uint16_t(table * 1000 + size_t(row));
}
float get(const RowTable& t, int64_t row) {
  if (t.pool().dtype() == DType::F32) return reinterpret_cast<const float*>(t.row(row))[0];
  return float(reinterpret_cast<const uint16_t*>(t.row(row))[0]);
}

// The tables as a pass leaves them after `n` tokens: rows of every position, an entry per ratio.
void fill(SequenceCache& s, int64_t n) {
  for (size_t l = 0; l < s.num_layers(); ++l) {
    LayerCache& c = s.layer(l);
    const int64_t ratio = c.geometry.ratio;
    size_t i = 0;
    for (RowTable* t : tables(c)) {
      const size_t table = l * 10 + i++;
      if (!t->attached()) continue;
      const bool per_entry = t == &c.entries || t == &c.index_keys;
      const int64_t rows = per_entry ? n / ratio : n;
      t->ensure_rows(rows);
      for (int64_t r = 0; r < rows; ++r) put(*t, table, r);
    }
  }
  s.set_length(n);
}

TEST(SequenceCacheFork, HoldsExactlyTheStateAfterTheCutAtEveryLength) {
  HostMemory memory;
  CachePools pools(memory, /*rows_per_block=*/8);
  SequenceCache source(pools, geometry(), /*retain=*/2);
  source.keep_all_rows();
  fill(source, 70);
  source.release_unneeded();  // keeps everything
  EXPECT_EQ(source.min_truncate_length(), 0);
  const int64_t before = pools.blocks_in_use();
  for (int64_t cut = 0; cut <= 70; ++cut) {
    auto f = source.fork(cut);
    EXPECT_EQ(f->length(), cut);
    for (size_t l = 0; l < f->num_layers(); ++l) {
      LayerCache& c = f->layer(l);
      size_t i = 0;
      for (RowTable* t : tables(c)) {
        const size_t table = l * 10 + i++;
        if (!t->attached()) continue;
        const bool per_entry = t == &c.entries || t == &c.index_keys;
        const int64_t rows = per_entry ? cut / c.geometry.ratio : cut;
        ASSERT_EQ(t->size(), rows) << "cut " << cut << ", layer " << l << ", table " << i - 1;
        ASSERT_FALSE(t->has_row(rows)) << "cut " << cut << ", layer " << l << ", table " << i - 1 << ": one row too many";
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(get(*t, r), tag(table, r)) << "cut " << cut << ", layer " << l << ", table " << i - 1 << ", row " << r;
      }
    }
    // Going on from the cut writes only the fork's own blocks.
    fill(*f, 70);
    EXPECT_EQ(f->keeps_all_rows(), true);
  }
  EXPECT_EQ(pools.blocks_in_use(), before);  // every fork's blocks back; the source's intact
  for (size_t l = 0; l < source.num_layers(); ++l) EXPECT_EQ(get(source.layer(l).kv, 69), tag(l * 10, 69));
}

TEST(SequenceCacheFork, ASourceThatReleasedRowsRefusesCutsBeforeThem) {
  HostMemory memory;
  CachePools pools(memory, 8);
  SequenceCache source(pools, geometry(), /*retain=*/2);
  fill(source, 70);
  source.release_unneeded();
  EXPECT_EQ(source.min_truncate_length(), 68);
  EXPECT_THROW(source.fork(60), Error);
  EXPECT_EQ(source.fork(68)->length(), 68);
  EXPECT_THROW(source.fork(71), Error);
}

}  // namespace sequence_fork
}  // namespace dsv4
