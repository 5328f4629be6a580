#include "io/mapped_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace dsv4 {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path.string()) {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(cat(path_, ": cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(cat(path_, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(cat(path_, ": not a regular file"));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error(cat(path_, ": cannot map: ", std::strerror(err)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() { release(); }

void MappedFile::prefault(const std::function<void(size_t bytes)>& done) const {
  if (data_) prefault(data_, size_, done);
}

void MappedFile::prefault(const uint8_t* from, size_t bytes, const std::function<void(size_t bytes)>& done) const {
  if (!data_ || bytes == 0) return;
  DSV4_CHECK(contains(from) && bytes <= size_t(data_ + size_ - from), path_, ": prefault outside the mapping");
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t begin = size_t(from - data_) / page * page, end = size_t(from - data_) + bytes;
  // In chunks, so that a caller can show progress over a file of tens of GB.
  constexpr size_t kChunk = size_t(256) << 20;
  for (size_t at = begin; at < end; at += kChunk) {
    const size_t n = std::min(kChunk, end - at);
    uint8_t* p = const_cast<uint8_t*>(data_ + at);
    bool populated = false;
#ifdef MADV_POPULATE_READ
    populated = ::madvise(p, n, MADV_POPULATE_READ) == 0;
    // EINVAL: a kernel older than 5.14 (no MADV_POPULATE_READ); touch the pages instead.
    if (!populated && errno != EINVAL) throw Error(cat(path_, ": cannot map its pages: ", std::strerror(errno)));
#endif
    if (!populated) {
      uint8_t sink = 0;
      for (size_t o = 0; o < n; o += page) sink ^= *static_cast<const volatile uint8_t*>(p + o);
      (void)sink;
    }
    if (done) done(n);
  }
}

void MappedFile::drop_pages(const uint8_t* p, size_t bytes) const {
  DSV4_CHECK(contains(p) && bytes <= size_t(data_ + size_ - p), path_, ": drop_pages outside the mapping");
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  // Pages shared with bytes not dropped stay. The mapping is private and never written: dropping
  // loses nothing. MADV_PAGEOUT first takes the file's pages out of the page cache as well (where
  // no other mapping holds them): the bytes were dropped because a copy holds them now, and the
  // cached file only fragments free memory for that copy (weights copied right after the files
  // were read got 86–95% of their bytes on huge pages; with the page cache released, 100%).
  // Advice: a kernel without MADV_PAGEOUT (before 5.4) ignores it.
#ifndef MADV_PAGEOUT
  constexpr int MADV_PAGEOUT = 21;
#endif
  if (end > begin) {
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

int64_t available_memory_bytes() {
  // (A test aid: DSV4_MEMORY_AVAILABLE=BYTES stands in for the machine's figure.)
  if (const char* v = std::getenv("DSV4_MEMORY_AVAILABLE")) return std::strtoll(v, nullptr, 10);
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return -1;
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

}  // namespace dsv4
