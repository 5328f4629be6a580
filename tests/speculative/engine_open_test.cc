// Engine::open maps every page of the checkpoint when asked to prefault (the default), so that
// decoding steps do not fault on weights they use for the first time; with prefault off the
// pages are left to first use.
#include <gtest/gtest.h>

#include <unistd.h>

#include "engine/engine.h"
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
  auto engine = Engine::open(test::tiny_a_dir(), {.backend = test::test_backend()});
  ASSERT_GE(engine->files->store.files().size(), 2u) << "tiny-a is sharded";
  const Mapped m = mapped_weights(*engine);
  EXPECT_EQ(m.resident, m.pages_bytes);
}

TEST(EngineOpen, WithoutPrefaultPagesAreMappedOnFirstUse) {
  auto engine = Engine::open(test::tiny_a_dir(), {.backend = test::test_backend(), .prefault = false});
  const Mapped m = mapped_weights(*engine);
  EXPECT_LT(m.resident, m.pages_bytes / 2);
}

}  // namespace
}  // namespace dsv4
