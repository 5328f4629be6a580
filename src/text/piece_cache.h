// Memo of BPE results per pre-tokenized piece. Natural text repeats the same words
// constantly, and a lookup is far cheaper than re-running the merges.
//
// A flat open-addressing table whose keys and results live in two arenas: one
// allocation-free probe per lookup, and clearing (when full, so that the memo
// follows the text being encoded) is a single reset. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::text {

class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 255;  // longer pieces are not memoized (the reference's MAX_LENGTH is 256)

  PieceCache();

  // Appends the memoized ids of `piece` to `ids`; false when absent.
  bool lookup(std::string_view piece, std::vector<int32_t>& ids) const;
  void insert(std::string_view piece, std::span<const int32_t> ids);

 private:
  struct Slot {
    uint64_t hash = 0;  // 0: empty
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_length = 0;
    uint16_t ids_length = 0;
  };
  static constexpr size_t kSlotCount = size_t{1} << 16;
  static constexpr size_t kMaxEntries = kSlotCount / 2;

  static uint64_t hash_of(std::string_view piece);
  void clear_locked();

  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t entries_ = 0;
};

}  // namespace dsv4::text
