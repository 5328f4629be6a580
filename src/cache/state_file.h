// Sequence states on disk (the prefix cache's disk tier): a binary stream of the rows as they are
// stored in memory, with a running checksum. A writer hashes every byte it writes and a reader
// every byte it reads, so a file is checked as it is read, without a second pass; a short file
// is an Error naming it, never a partial state.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/sequence_cache.h"

namespace dsv4 {

// 64-bit hash of a byte stream, eight bytes at a time (fast enough for gigabytes of rows; it is a
// corruption check, not a cryptographic one).
class StreamHash {
 public:
  void add(const void* data, size_t n);
  uint64_t value() const;

 private:
  uint64_t h_ = 0x9E3779B97F4A7C15ull, tail_ = 0, count_ = 0;
  int tail_bytes_ = 0;
};

class StateWriter {
 public:
  explicit StateWriter(const std::filesystem::path& path);  // throws naming the file
  void bytes(const void* data, size_t n);
  template <class T> void put(const T& v) { bytes(&v, sizeof v); }
  void put_ints(const std::vector<int32_t>& v);  // count, then the values
  uint64_t hash() const { return hash_.value(); }
  void finish();  // the hash, then flush; throws when the stream failed (a full disk)
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
  StreamHash hash_;
};

class StateReader {
 public:
  explicit StateReader(const std::filesystem::path& path);
  void bytes(void* data, size_t n);  // throws at the end of the file
  template <class T> T get() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  std::vector<int32_t> get_ints(int64_t most);
  void finish();  // the stored hash against what was read; throws on a mismatch
  void skip_to_checksum();  // reads (and hashes) what is left before the checksum
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  StreamHash hash_;
};

// A cache's tables: for each, its rows in order (released blocks skipped) and the counts that
// place them. read_cache fills `into`, a cache just made for the same model, and checks that
// the geometry matches.
void write_cache(StateWriter& w, const SequenceCache& cache);
void read_cache(StateReader& r, SequenceCache& into);
void write_table(StateWriter& w, const RowTable& table);
void read_table(StateReader& r, RowTable& into);

}  // namespace dsv4
