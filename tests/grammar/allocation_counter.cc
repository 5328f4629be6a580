#include "allocation_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local int64_t* counter = nullptr;  // the live AllocationCounter's count, if any
}  // namespace

void* operator new(std::size_t n) {
  if (counter) ++*counter;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace dsv4::test {

AllocationCounter::AllocationCounter() { counter = &count_; }
AllocationCounter::~AllocationCounter() { stop(); }
int64_t AllocationCounter::stop() {
  if (counting_) counter = nullptr;
  counting_ = false;
  return count_;
}

}  // namespace dsv4::test
