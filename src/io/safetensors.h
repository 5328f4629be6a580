// safetensors checkpoints: one file, or shards listed in model.safetensors.index.json.
//
// Files are memory-mapped read-only; tensors are views into the mapping. Everything in
// a header is validated before any tensor is exposed (lengths, dtypes, shapes, byte
// ranges inside the data section and not overlapping, unique names), and every error
// names the file and the tensor.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace dsv4 {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the file mapping
  size_t nbytes = 0;
  const std::string* file = nullptr;  // the shard holding it (for messages)

  int64_t numel() const;
  std::string shape_string() const;  // "[4, 256]"
};

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);

  const std::string& path() const { return map_.path(); }
  const MappedFile& mapping() const { return map_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  explicit SafetensorsFile(MappedFile map) : map_(std::move(map)) {}
  void parse_header();

  MappedFile map_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory (or of a single .safetensors file).
class TensorStore {
 public:
  // A directory with model.safetensors.index.json (shards), or with exactly one
  // *.safetensors file, or a path to a .safetensors file.
  static TensorStore open(const std::filesystem::path& path);

  const TensorInfo* find(const std::string& name) const;
  const TensorInfo& get(const std::string& name) const;  // throws naming the tensor
  std::vector<const TensorInfo*> all() const;              // sorted by name
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  const std::filesystem::path& root() const { return root_; }
  uint64_t file_bytes() const;  // all mapped files, headers included
  void prefault(const std::function<void(size_t bytes)>& done = {}) const;  // MappedFile::prefault of every file
  void prefault(const uint8_t* p, size_t bytes) const;  // the pages of a range in one of the files
  // MappedFile::drop_pages for a range in one of the files; ranges elsewhere are left alone.
  void drop_pages(const uint8_t* p, size_t bytes) const;

 private:
  std::filesystem::path root_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const TensorInfo*> by_name_;
};

}  // namespace dsv4
