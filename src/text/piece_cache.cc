#include "text/piece_cache.h"

#include <cstring>

namespace dsv4::text {

PieceCache::PieceCache() : slots_(kSlotCount) {}

uint64_t PieceCache::hash_of(std::string_view piece) {
  // 8 bytes at a time, multiply-xorshift mixing; good spread for short strings.
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ piece.size();
  size_t i = 0;
  for (; i + 8 <= piece.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, piece.data() + i, 8);
    h = (h ^ word) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, piece.data() + i, piece.size() - i);
  h = (h ^ tail) * 0x94D049BB133111EBULL;
  h ^= h >> 29;
  return h == 0 ? 1 : h;
}

bool PieceCache::lookup(std::string_view piece, std::vector<int32_t>& ids) const {
  const uint64_t hash = hash_of(piece);
  std::lock_guard lock(mutex_);
  for (size_t i = hash & (kSlotCount - 1);; i = (i + 1) & (kSlotCount - 1)) {
    const Slot& slot = slots_[i];
    if (slot.hash == 0) return false;
    if (slot.hash == hash && slot.key_length == piece.size() &&
        std::memcmp(keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0) {
      ids.insert(ids.end(), ids_.begin() + slot.ids_offset, ids_.begin() + slot.ids_offset + slot.ids_length);
      return true;
    }
  }
}

void PieceCache::insert(std::string_view piece, std::span<const int32_t> ids) {
  if (piece.size() > kMaxPieceBytes) return;
  const uint64_t hash = hash_of(piece);
  std::lock_guard lock(mutex_);
  if (entries_ >= kMaxEntries) clear_locked();
  for (size_t i = hash & (kSlotCount - 1);; i = (i + 1) & (kSlotCount - 1)) {
    Slot& slot = slots_[i];
    if (slot.hash == hash && slot.key_length == piece.size() &&
        std::memcmp(keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0) {
      return;  // another thread got there first
    }
    if (slot.hash != 0) continue;
    slot = {hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(ids_.size()),
            static_cast<uint16_t>(piece.size()), static_cast<uint16_t>(ids.size())};
    keys_.append(piece);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++entries_;
    return;
  }
}

void PieceCache::clear_locked() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  keys_.clear();
  ids_.clear();
  entries_ = 0;
}

}  // namespace dsv4::text
