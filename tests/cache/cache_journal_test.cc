// The cache journal (cache/cache_journal.h): what a pipeline stage replays to keep its copies of
// the scheduler's sequence caches in step. A scheduler-side cache (layers 0..1 its own) records
// every change but a pass's; a stage's mirror (layers 2..3) replays them through the words of a
// message, and ends with the same sequences at the same lengths, forks included. Malformed lists
// and operations on unknown sequences are refused, naming them.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cache/cache_journal.h"
#include "cache/sequence_cache.h"
#include "core/error.h"

namespace dsv4 {
namespace cache_journal {

class HostMemory final : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void release(void* p) override { std::free(p); }
};

std::vector<LayerCacheGeometry> geometry() {
  LayerCacheGeometry w{4, 8, 0, 0, 0, 0}, csa{4, 8, 4, 16, 2, 8}, hca{4, 8, 16, 8, 0, 0};
  return {w, csa, hca, w};
}

// A pass, which each stage runs on its own layers: their rows, and the length it adds.
void pass(SequenceCache& s, int64_t tokens) {
  const int64_t n = s.length() + tokens;
  for (size_t l = 0; l < s.num_layers(); ++l) {
    LayerCache& c = s.layer(l);
    for (RowTable* t : {&c.kv, &c.state, &c.entries, &c.index_state, &c.index_keys}) {
      if (!t->attached()) continue;
      const bool per_entry = t == &c.entries || t == &c.index_keys;
      t->ensure_rows(per_entry ? n / c.geometry.ratio : n);
    }
  }
  s.set_length(n);
}

TEST(CacheJournal, AMirrorReplayingTheWordsEndsWithTheSchedulersSequences) {
  HostMemory memory;
  CachePools pools(memory, 8), stage_pools(memory, 8);
  auto journal = std::make_shared<CacheJournal>();
  CacheMirror mirror([&] { return std::make_unique<SequenceCache>(stage_pools, geometry(), 4, 2, -1); });
  auto replay = [&] {
    std::vector<int64_t> words;
    CacheJournal::encode(journal->take(), words);
    const std::vector<CacheOp> ops = CacheJournal::decode(words);
    mirror.apply(ops);
    return ops.size();
  };
  auto a = std::make_unique<SequenceCache>(pools, geometry(), 4, 0, 2, journal);
  auto b = std::make_unique<SequenceCache>(pools, geometry(), 4, 0, 2, journal);
  ASSERT_NE(a->journal_id(), b->journal_id());
  EXPECT_EQ(replay(), 2u);  // two New
  ASSERT_EQ(mirror.size(), 2u);
  pass(*a, 20), pass(mirror.get(a->journal_id()), 20);
  pass(*b, 7), pass(mirror.get(b->journal_id()), 7);
  a->keep_all_rows();
  a->truncate(17);  // a rejected draft
  EXPECT_EQ(replay(), 2u);
  EXPECT_EQ(mirror.get(a->journal_id()).length(), 17);
  EXPECT_TRUE(mirror.get(a->journal_id()).keeps_all_rows());
  auto fork = a->fork(12, /*writable=*/false);  // the prefix cache's snapshot
  b.reset();                                    // a finished request
  EXPECT_EQ(replay(), 2u);
  ASSERT_EQ(mirror.size(), 2u);
  EXPECT_EQ(mirror.get(fork->journal_id()).length(), 12);
  EXPECT_THROW(mirror.get(7777), Error);
  // Nothing changed since: nothing to send.
  EXPECT_EQ(replay(), 0u);
}

TEST(CacheJournal, MalformedListsAndUnknownSequencesAreRefused) {
  EXPECT_THROW(CacheJournal::decode(std::vector<int64_t>{1, 2, 3}), Error);          // not 4 words an op
  EXPECT_THROW(CacheJournal::decode(std::vector<int64_t>{99, 1, 0, 0}), Error);      // no such kind
  HostMemory memory;
  CachePools pools(memory, 8);
  CacheMirror mirror([&] { return std::make_unique<SequenceCache>(pools, geometry(), 4); });
  try {
    mirror.apply(std::vector<CacheOp>{{CacheOp::Truncate, 42, 3, 0}});
    FAIL() << "a truncate of an unknown sequence was applied";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("42"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mirror.apply(std::vector<CacheOp>{{CacheOp::Release, 5, 0, 0}}), Error);
  mirror.apply(std::vector<CacheOp>{{CacheOp::New, 5, 0, 0}});
  EXPECT_THROW(mirror.apply(std::vector<CacheOp>{{CacheOp::New, 5, 0, 0}}), Error);  // twice
}

}  // namespace cache_journal
}  // namespace dsv4
