// Scratch tensors of one forward pass: a bump allocator over backend memory.
//
// reset() at the start of a pass invalidates every tensor handed out before. Capacity
// only grows (to the largest pass seen) and is reused in place, so steady-state decoding
// allocates nothing and touches no fresh memory.
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
  // A point in the allocation order; rewind(mark) frees everything handed out after it (a
  // layer's intermediates, once its output has been copied out), so a pass needs the memory
  // of its largest layer, not of all its layers together.
  struct Mark { size_t chunk = 0, used = 0; };
  Mark mark() const;
  void rewind(Mark m);
  size_t capacity() const;

 private:
  struct Chunk { void* data; size_t size; size_t used; };
  DeviceMemory& memory_;
  std::vector<Chunk> chunks_;
  size_t current_ = 0;  // the chunk alloc() takes from
};

}  // namespace dsv4
