// Where a backend keeps tensors: host memory for the CPU backend, device memory for a GPU.
#pragma once
#include <cstddef>

namespace dsv4 {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(size_t bytes) = 0;  // 64-byte aligned; throws Error when out of memory
  virtual void release(void* p) = 0;
};

}  // namespace dsv4
