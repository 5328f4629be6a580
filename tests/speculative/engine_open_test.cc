// Engine::open reads the weights in place from the mapped checkpoint (every page mapped at
// open when asked to prefault, so that decoding steps do not fault on weights they use for the
// first time; with prefault off the pages are left to first use), or has the CPU backend copy
// them into its memory on huge pages, releasing the mapping's pages: same logits, one copy.
#include <gtest/gtest.h>

#include <cstring>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/weights.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

struct Mapped {
  int64_t resident = 0, pages_bytes = 0;
};

Mapped mapped_weights(const Engine& e) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  Mapped m;
  for (const auto& f : e.files->store.files()) {
    const int64_t resident = test::mapped_resident_bytes(f->mapping().data());
    EXPECT_GE(resident, 0) << f->path() << " is not mapped";
    m.resident += resident;
    m.pages_bytes += (int64_t(f->mapping().size()) + page - 1) / page * page;
  }
  return m;
}

TEST(EngineOpen, PrefaultMapsEveryPageOfEveryShard) {
  auto engine = Engine::open(test::tiny_a_dir(), {.backend = test::test_backend(), .weights = WeightPlacement::Mapped});
  ASSERT_GE(engine->files->store.files().size(), 2u) << "tiny-a is sharded";
  const Mapped m = mapped_weights(*engine);
  // Every page was mapped; the kernel may since have reclaimed a few clean ones when the machine is
  // short of memory (tests run side by side), so a page in a hundred may be gone. Without prefault
  // fewer than half are mapped (below): the two cases stay far apart.
  EXPECT_LE(m.resident, m.pages_bytes);
  EXPECT_GE(m.resident, m.pages_bytes - m.pages_bytes / 100);
}

TEST(EngineOpen, WithoutPrefaultPagesAreMappedOnFirstUse) {
  auto engine = Engine::open(test::tiny_a_dir(),
                             {.backend = test::test_backend(), .prefault = false, .weights = WeightPlacement::Mapped});
  const Mapped m = mapped_weights(*engine);
  EXPECT_LT(m.resident, m.pages_bytes / 2);
}

std::vector<float> logits_of(Engine& e, const std::vector<int32_t>& tokens) {
  auto seq = e.target->new_sequence();
  Transformer::Output out;
  Transformer::Request r{seq.get(), tokens, /*all_logits=*/true};
  e.target->forward(std::span(&r, 1), out);
  return out.logits;
}

TEST(EngineOpen, WeightsInMemoryLeaveTheMappingAndGiveTheSameLogits) {
  const BackendOptions cpu{BackendKind::Cpu, 2};
  auto mapped = Engine::open(test::tiny_a_dir(), {.backend = cpu, .weights = WeightPlacement::Mapped});
  auto copied = Engine::open(test::tiny_a_dir(), {.backend = cpu, .weights = WeightPlacement::Memory});
  auto* backend = dynamic_cast<CpuBackend*>(copied->backend.get());
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(0u, dynamic_cast<CpuBackend&>(*mapped->backend).weight_bytes_in_memory());
  // Every tensor the model reads is in the backend's memory, none in the files.
  size_t tensors = 0;
  for (const auto& f : copied->files->store.files()) tensors += f->mapping().size();
  EXPECT_GT(backend->weight_bytes_in_memory(), tensors / 2);
  // (and the bounded head's copy, made from the head: model/argmax_head.h)
  ASSERT_NE(copied->argmax_head, nullptr);
  EXPECT_LE(backend->weight_bytes_in_memory(),
            tensors + copied->argmax_head->hi().bytes() + copied->argmax_head->lo().bytes() + (size_t(8) << 10));
  for (const WeightView* w : weight_views(copied->files->weights, copied->config()))
    for (const auto& f : copied->files->store.files()) {
      ASSERT_FALSE(f->mapping().contains(w->data)) << w->name() << " is still read from " << f->path();
      if (w->scale) {
        ASSERT_FALSE(f->mapping().contains(w->scale)) << w->name() << "'s scales";
      }
    }
  // The mapping's pages were released as the copy went (a page or so per tensor may remain).
  const Mapped m = mapped_weights(*copied);
  EXPECT_LT(m.resident, m.pages_bytes / 4);

  const std::vector<int32_t> tokens{5, 17, 99, 3, 250, 1, 42, 7, 8, 300, 11, 64};
  const std::vector<float> a = logits_of(*mapped, tokens), b = logits_of(*copied, tokens);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(EngineOpen, WeightPlacementNamesRoundTrip) {
  for (WeightPlacement p : {WeightPlacement::Auto, WeightPlacement::Mapped, WeightPlacement::Memory})
    EXPECT_EQ(p, parse_weight_placement(weight_placement_name(p)));
  EXPECT_THROW(parse_weight_placement("gpu"), Error);
}

}  // namespace
}  // namespace dsv4
