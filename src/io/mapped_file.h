// A read-only memory mapping of a whole file. Weights are used in place from it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace dsv4 {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::filesystem::path& path);  // throws Error naming the file
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Maps every page of the file now (reading it from disk where it is not cached), so that
  // the first use of a weight does not fault: a decode step that routes to experts never
  // touched before would otherwise take a fault per 64 KB (the kernel's fault-around), ~210
  // per V4-Flash routed expert.
  // Throws Error naming the file if the kernel cannot (an I/O error, a file cut short).
  // Maps every page (reading what is not cached yet), in chunks; `done(bytes)` after each.
  void prefault(const std::function<void(size_t bytes)>& done = {}) const;
  // The same for the pages of [p, p + bytes) only (a pipeline stage's share of the weights).
  void prefault(const uint8_t* p, size_t bytes, const std::function<void(size_t bytes)>& done = {}) const;
  // Unmaps the whole pages of [p, p + bytes) (which must lie in this file's mapping) and takes
  // them out of the page cache where no other mapping holds them: a later read maps them again
  // from the file. For bytes copied elsewhere, so that the machine does not hold them twice.
  void drop_pages(const uint8_t* p, size_t bytes) const;
  bool contains(const uint8_t* p) const { return data_ && p >= data_ && p < data_ + size_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Bytes the kernel could hand out without swapping (MemAvailable of /proc/meminfo); -1 if unknown.
int64_t available_memory_bytes();

}  // namespace dsv4
