#include "backend/cpu/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <sys/mman.h>

#include "core/error.h"

namespace dsv4::cpu {

void* allocate_host(size_t bytes) {
  constexpr size_t kHugePage = size_t(2) << 20;
  const bool huge = bytes >= 2 * kHugePage;
  const size_t align = huge ? kHugePage : 64;
  const size_t size = (std::max<size_t>(bytes, 64) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  DSV4_CHECK(p, "cpu backend: out of memory allocating ", bytes, " bytes");
#ifdef MADV_HUGEPAGE
  if (huge) ::madvise(p, size, MADV_HUGEPAGE);  // advice: failing (huge pages off) changes nothing
#endif
  return p;
}

void release_host(void* p) { std::free(p); }

}  // namespace dsv4::cpu
