// Scratch tensors of one forward pass: a bump allocator over backend memory.
//
// reset() at the start of a pass invalidates every tensor handed out before. Capacity
// only grows (to the largest pass seen), so steady-state decoding allocates nothing.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace dsv4 {

class Workspace {
 public:
  explicit Workspace(DeviceMemory& memory) : memory_(memory) {}
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Tensor alloc(DType dtype, std::initializer_list<int64_t> dims);
  Tensor alloc_f32(std::initializer_list<int64_t> dims) { return alloc(DType::F32, dims); }
  void reset();
  size_t capacity() const;

 private:
  struct Chunk { void* data; size_t size; size_t used; };
  DeviceMemory& memory_;
  std::vector<Chunk> chunks_;
};

}  // namespace dsv4
