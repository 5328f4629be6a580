// Workspace: a pass that allocates what the one before it did reuses the same memory (no new
// chunk, no fresh page), and rewind(mark) hands a layer's memory to the next layer.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "core/workspace.h"

namespace dsv4 {
namespace {

class CountingMemory : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override {
    ++allocations;
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void release(void* p) override {
    ++releases;
    std::free(p);
  }
  int allocations = 0, releases = 0;
};

// A pass shaped like a model's: two stream buffers, then per layer intermediates of growing sizes.
std::vector<void*> run_pass(Workspace& ws, int layers, bool rewind) {
  std::vector<void*> seen;
  ws.reset();
  seen.push_back(ws.alloc_f32({512, 4, 64}).data);
  seen.push_back(ws.alloc_f32({512, 4, 64}).data);
  const Workspace::Mark begin = ws.mark();
  for (int l = 0; l < layers; ++l) {
    for (int64_t cols : {64, 4096, 256, 1 << 16, 128}) seen.push_back(ws.alloc_f32({512, cols}).data);
    if (rewind) ws.rewind(begin);
  }
  return seen;
}

TEST(Workspace, LaterPassesReuseTheFirstPassesMemory) {
  CountingMemory memory;
  Workspace ws(memory);
  const std::vector<void*> first = run_pass(ws, 3, false);
  const int after_first = memory.allocations;
  EXPECT_GT(after_first, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(first, run_pass(ws, 3, false)) << "pass " << i + 2;
  EXPECT_EQ(after_first, memory.allocations);
  EXPECT_EQ(0, memory.releases);  // no chunk is swapped for a fresh one
  // A smaller pass (a decode step) fits in what is there.
  ws.reset();
  ws.alloc_f32({1, 4, 64});
  EXPECT_EQ(after_first, memory.allocations);
}

TEST(Workspace, RewindGivesALayersMemoryToTheNext) {
  CountingMemory memory;
  Workspace ws(memory);
  const std::vector<void*> seen = run_pass(ws, 4, true);
  const size_t per_layer = 5;
  for (int l = 1; l < 4; ++l)
    for (size_t i = 0; i < per_layer; ++i)
      EXPECT_EQ(seen[2 + i], seen[2 + size_t(l) * per_layer + i]) << "layer " << l << " tensor " << i;
  const size_t one_layer = ws.capacity();
  run_pass(ws, 40, true);  // ten times the depth: no more memory
  EXPECT_EQ(one_layer, ws.capacity());
  // The stream buffers before the mark are never handed out again within the pass.
  for (size_t i = 2; i < seen.size(); ++i) {
    EXPECT_NE(seen[0], seen[i]);
    EXPECT_NE(seen[1], seen[i]);
  }
}

TEST(Workspace, RewindToAMarkAfterTheAllocationsIsAnError) {
  CountingMemory memory;
  Workspace ws(memory);
  ws.alloc_f32({1 << 18});
  ws.alloc_f32({1 << 19});  // a second chunk
  const Workspace::Mark late = ws.mark();
  ws.reset();
  EXPECT_THROW(ws.rewind(late), Error);
}

}  // namespace
}  // namespace dsv4
