// Counts the allocations (operator new) the current thread makes while a counter is alive, for
// tests that a path allocates nothing per step. The global operator new of the grammar test
// binary is replaced for this (allocation_counter.cc, compiled outside the unity build).
#pragma once
#include <cstdint>

namespace dsv4::test {

class AllocationCounter {
 public:
  AllocationCounter();   // starts counting on this thread
  ~AllocationCounter();  // stops
  int64_t stop();        // stops and returns the count
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

 private:
  int64_t count_ = 0;
  bool counting_ = true;
};

}  // namespace dsv4::test
