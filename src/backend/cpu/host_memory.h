// Host memory for the CPU backend's buffers.
//
// Fresh memory is expensive the first time it is touched: every 4 KiB page costs a fault and a
// clear (on the virtual machines measured, ~10 µs per page: seconds for the ~1.5 GB a 512-row
// prefill chunk once touched). So large buffers are 2 MiB aligned and advised onto transparent
// huge pages (one fault per 2 MiB, and no TLB misses over them), and the buffers that grow
// (AlignedBuffer) grow geometrically and are kept: steady-state work touches no fresh page.
#pragma once
#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>

namespace dsv4::cpu {

// 64-byte aligned; from 4 MiB on, 2 MiB aligned and advised onto huge pages (where the system
// allows it only on request; elsewhere the advice changes nothing). Throws Error when out of memory.
void* allocate_host(size_t bytes);
void release_host(void* p);

// A growing buffer of T, 64-byte aligned: get(n) returns room for n elements and at least 64
// bytes more (vector loads may run past the last element). Growth keeps the contents and
// zero-fills the rest (as std::vector::resize); capacity only grows.
template <class T>
class AlignedBuffer {
 public:
  T* get(size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (n + kSlack > capacity_) grow(n + kSlack);
    return data_.get();
  }
  T* data() const { return data_.get(); }

 private:
  static constexpr size_t kSlack = (64 + sizeof(T) - 1) / sizeof(T);
  struct Release {
    void operator()(T* p) const { release_host(p); }
  };
  void grow(size_t n) {
    const size_t capacity = n > capacity_ + capacity_ / 2 ? n : capacity_ + capacity_ / 2;
    std::unique_ptr<T, Release> fresh(static_cast<T*>(allocate_host(capacity * sizeof(T))));
    if (capacity_) std::memcpy(fresh.get(), data_.get(), capacity_ * sizeof(T));
    std::memset(static_cast<void*>(fresh.get() + capacity_), 0, (capacity - capacity_) * sizeof(T));
    data_ = std::move(fresh);
    capacity_ = capacity;
  }
  std::unique_ptr<T, Release> data_;
  size_t capacity_ = 0;
};

}  // namespace dsv4::cpu
