#include "cache/cache_journal.h"

#include "cache/sequence_cache.h"
#include "core/error.h"

namespace dsv4 {

int64_t CacheJournal::next_id() {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_id_++;
}

void CacheJournal::record(const CacheOp& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  ops_.push_back(op);
}

std::vector<CacheOp> CacheJournal::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CacheOp> ops;
  ops.swap(ops_);
  return ops;
}

void CacheJournal::encode(std::span<const CacheOp> ops, std::vector<int64_t>& words) {
  for (const CacheOp& op : ops) {
    words.push_back(int64_t(op.kind) | (int64_t(op.writable) << 8));
    words.push_back(op.id);
    words.push_back(op.a);
    words.push_back(op.b);
  }
}

std::vector<CacheOp> CacheJournal::decode(std::span<const int64_t> words) {
  DSV4_CHECK(words.size() % 4 == 0, "cache journal: ", words.size(), " words, not whole operations of 4");
  std::vector<CacheOp> ops;
  for (size_t i = 0; i < words.size(); i += 4) {
    const int64_t kind = words[i] & 0xff;
    DSV4_CHECK(kind >= CacheOp::New && kind <= CacheOp::Fork, "cache journal: unknown operation ", kind);
    ops.push_back({CacheOp::Kind(kind), words[i + 1], words[i + 2], words[i + 3], ((words[i] >> 8) & 1) != 0});
  }
  return ops;
}

SequenceCache& CacheMirror::get(int64_t id) const {
  auto it = caches_.find(id);
  DSV4_CHECK(it != caches_.end(), "pipeline stage: no sequence ", id, " (the scheduler's caches and this stage's ",
             "disagree)");
  return *it->second;
}

CacheMirror::CacheMirror(Factory make) : make_(std::move(make)) {}
CacheMirror::~CacheMirror() = default;

void CacheMirror::apply(std::span<const CacheOp> ops) {
  for (const CacheOp& op : ops) {
    switch (op.kind) {
      case CacheOp::New:
        DSV4_CHECK(!caches_.count(op.id), "pipeline stage: sequence ", op.id, " created twice");
        caches_[op.id] = make_();
        break;
      case CacheOp::Release:
        DSV4_CHECK(caches_.erase(op.id) == 1, "pipeline stage: release of an unknown sequence ", op.id);
        break;
      case CacheOp::Truncate: get(op.id).truncate(op.a); break;
      case CacheOp::SkipTo: get(op.id).skip_to(op.a); break;
      case CacheOp::KeepAll: get(op.id).keep_all_rows(op.a != 0); break;
      case CacheOp::Fork:
        DSV4_CHECK(!caches_.count(op.id), "pipeline stage: fork into an existing sequence ", op.id);
        caches_[op.id] = get(op.a).fork(op.b, op.writable);
        break;
    }
  }
}

}  // namespace dsv4
