// What happens to a model's sequence caches between passes, as a list of operations another
// process replays on its own copy of the same layers' caches (a pipeline stage: distributed/).
//
// A process that schedules keeps every sequence's cache of its own layers; each stage keeps the
// caches of its layers for the same sequences. Rows are written by the passes, on every stage
// alike; everything else that changes a cache — a new sequence, a rollback after verification,
// a fork for the prefix cache, a sequence that ends — is recorded here by SequenceCache as it
// happens, and travels with the next pass, so each stage's caches are the scheduler's at every
// pass. Per-pass bookkeeping (the length a pass adds, the rows no rollback needs any more) is
// each stage's own: it follows from the pass.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace dsv4 {

class SequenceCache;

struct CacheOp {
  enum Kind : int64_t { New = 1, Release, Truncate, SkipTo, KeepAll, Fork };
  Kind kind = New;
  int64_t id = 0;       // the sequence
  int64_t a = 0, b = 0; // Truncate/SkipTo: length; KeepAll: keep; Fork: source id (a), length (b) —
  bool writable = true; // Fork: a sequence that goes on (else a snapshot)
};

// Ids and the operations since the last take(); shared by the caches that record into it (they
// may be released on any thread).
class CacheJournal {
 public:
  int64_t next_id();
  void record(const CacheOp& op);
  std::vector<CacheOp> take();

  // As int64 words (four per operation: kind | writable << 8, id, a, b), for a message.
  static void encode(std::span<const CacheOp> ops, std::vector<int64_t>& words);
  static std::vector<CacheOp> decode(std::span<const int64_t> words);  // throws on a malformed list

 private:
  std::mutex mutex_;
  int64_t next_id_ = 1;
  std::vector<CacheOp> ops_;
};

// A stage's copies of the scheduler's caches, by id, kept in step by replaying its operations.
class CacheMirror {
 public:
  using Factory = std::function<std::unique_ptr<SequenceCache>()>;
  explicit CacheMirror(Factory make);
  ~CacheMirror();
  void apply(std::span<const CacheOp> ops);  // throws naming an operation on an unknown sequence
  SequenceCache& get(int64_t id) const;      // throws when there is none
  size_t size() const { return caches_.size(); }

 private:
  Factory make_;
  std::map<int64_t, std::unique_ptr<SequenceCache>> caches_;
};

}  // namespace dsv4
