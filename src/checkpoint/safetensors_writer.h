// Streaming safetensors writer: the tensor list is declared up front, the header is
// written first, then each tensor's bytes arrive in declared order, in chunks of any
// size, so that multi-GB tensors are never held in memory.
//
// Layout: the header JSON is padded with spaces so that the data section starts at a
// multiple of 64 bytes. Tensors are contiguous (as the safetensors format requires);
// those whose size is a multiple of 64 bytes are placed first so that every large
// weight stays 64-byte aligned, the odd-sized ones (scales, small vectors) follow.
// The arrival order stays the declared order; bytes go to their place with pwrite.
//
// The file is written as `<path>.partial` and renamed on finish(), so a failed or
// interrupted run never leaves a file that looks complete.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dsv4 {

struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  uint64_t nbytes() const;  // numel x dtype size
};

class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorDecl> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // removes the partial file unless finish() succeeded
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Starts the next declared tensor; `name` must match it and the previous one must be complete.
  void begin_tensor(const std::string& name);
  // Appends bytes to the current tensor; more bytes than it holds is an error naming it.
  void write(const void* data, size_t nbytes);
  // begin_tensor + write of the whole tensor.
  void write_tensor(const std::string& name, const void* data, size_t nbytes);
  // Checks that every tensor is complete, closes and renames the file into place.
  void finish();

  const std::filesystem::path& path() const { return path_; }
  uint64_t data_bytes() const { return data_bytes_; }  // sum of tensor sizes
  uint64_t file_bytes() const { return data_start_ + data_bytes_; }

 private:
  void check_current_complete() const;
  void close_file();

  std::filesystem::path path_, partial_path_;
  std::vector<TensorDecl> tensors_;
  std::vector<uint64_t> offsets_;   // in the data section, per declared tensor
  uint64_t data_start_ = 0;         // 8 + header length
  uint64_t data_bytes_ = 0;
  int fd_ = -1;
  long current_ = -1;               // index of the tensor being written
  uint64_t written_ = 0;            // bytes of the current tensor written so far
  bool finished_ = false;
};

// ---- Sharded checkpoints -----------------------------------------------------------

// "model-00001-of-00003.safetensors"
std::string shard_file_name(int index, int count);

// Splits tensors, in order, into consecutive groups: at least `min_shards` (when there
// are enough tensors) and none above max(max_shard_bytes, its largest tensor).
std::vector<std::vector<TensorDecl>> plan_shards(const std::vector<TensorDecl>& tensors,
                                                 uint64_t max_shard_bytes, int min_shards);

// Writes a checkpoint directory: the shards of `plan` one after the other, then
// model.safetensors.index.json (metadata.total_size and weight_map). The tensors
// arrive in plan order, through the same begin_tensor / write calls as one file.
class ShardedWriter {
 public:
  ShardedWriter(const std::filesystem::path& dir, std::vector<std::vector<TensorDecl>> plan);
  void begin_tensor(const std::string& name);
  void write(const void* data, size_t nbytes);
  void write_tensor(const std::string& name, const void* data, size_t nbytes);
  void finish();  // completes the last shard and writes the index

  uint64_t total_bytes() const { return total_bytes_; }  // files on disk, headers included
  int num_shards() const { return int(plan_.size()); }

 private:
  void open_shard(size_t index);

  std::filesystem::path dir_;
  std::vector<std::vector<TensorDecl>> plan_;
  size_t shard_ = 0;                 // index of the open shard
  size_t next_in_shard_ = 0;         // declared tensors of that shard already begun
  std::unique_ptr<SafetensorsWriter> writer_;
  uint64_t total_bytes_ = 0;
};

}  // namespace dsv4
