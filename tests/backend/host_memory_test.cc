// The CPU backend's host buffers: alignment, huge-page alignment of large ones, and growth that
// keeps the contents and zero-fills the rest (as std::vector::resize did before them).
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cpu/host_memory.h"

namespace dsv4::cpu {
namespace {

TEST(HostMemory, LargeAllocationsAreHugePageAligned) {
  for (size_t bytes : {size_t(1), size_t(100), size_t(4096), size_t(1) << 20}) {
    void* p = allocate_host(bytes);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 64) << bytes;
    release_host(p);
  }
  for (size_t bytes : {size_t(4) << 20, (size_t(9) << 20) + 5}) {
    void* p = allocate_host(bytes);
    EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20)) << bytes;
    static_cast<volatile uint8_t*>(p)[bytes - 1] = 1;  // the whole size is usable
    release_host(p);
  }
}

TEST(HostMemory, AlignedBufferGrowsKeepingItsContents) {
  AlignedBuffer<int32_t> buffer;
  int32_t* a = buffer.get(10);
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(a) % 64);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(0, a[i]);
    a[i] = i + 1;
  }
  EXPECT_EQ(a, buffer.get(5));  // smaller: same memory
  int32_t* b = buffer.get(size_t(3) << 20);  // 12 MiB: moves to huge pages
  EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(b) % (size_t(2) << 20));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(i + 1, b[i]);
  for (size_t i = 10; i < (size_t(3) << 20); i += 4093) EXPECT_EQ(0, b[i]);
  b[(size_t(3) << 20) - 1] = 7;
  int32_t* c = buffer.get((size_t(3) << 20) + 1);  // grows by half: room for a million more
  EXPECT_EQ(7, c[(size_t(3) << 20) - 1]);
  EXPECT_EQ(c, buffer.get(size_t(4) << 20));
  EXPECT_EQ(c, buffer.data());
}

}  // namespace
}  // namespace dsv4::cpu
