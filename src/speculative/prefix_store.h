// The prefix cache's disk tier (`--kv-cache-dir`): kept sequence states as files, so that a
// restarted server (or a chat resumed tomorrow) does not prefill a long prefix again.
//
// A file holds a header (magic, format version, the checkpoint's identity), the state's tokens,
// its rows as stored in memory (SpeculativeDecoder::save_state) and a checksum over everything.
// It is written under a temporary name and renamed, so a crash never leaves a file that reads as
// valid. Its name begins with the checkpoint's identity: servers of different checkpoints share a
// directory, each seeing only its own files. A file of ours that is truncated, corrupted, of
// another version or (despite its name) of another checkpoint is skipped with one log line and
// removed, never used; a full or read-only disk logs and serving goes on.
//
// The index (each file's tokens and lengths) is read at start from the files' beginnings; a file
// is read whole, and its checksum checked, only when a prompt needs it. Bounded in bytes: the
// least recently used files go first.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "speculative/speculative_decoder.h"

namespace dsv4 {

class PrefixStore {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  // A file is replaced by a newer state that offers all its cuts but for at most this many tokens.
  static constexpr int64_t kSupersedeSlack = 64;
  struct Options {
    std::filesystem::path dir;
    uint64_t checkpoint = 0;        // ModelFiles::identity()
    int64_t max_bytes = int64_t(32) << 30;
    int64_t min_tokens = 1024;      // shorter states are not written
  };
  using Log = std::function<void(const std::string&)>;
  // Creates the directory if needed and reads the index (throws only when the directory cannot be
  // made or read; bad files are logged and removed).
  PrefixStore(Options options, SpeculativeDecoder& decoder, Log log);

  // The longest cut a file offers `prompt` (0: none), as PrefixCache::find computes it.
  int64_t best_cut(std::span<const int32_t> prompt) const;
  // That file's state, read and checked; nullopt (the file logged and removed) when it fails.
  std::optional<SequenceState> load_best(std::span<const int32_t> prompt);
  // Writes a state of at least min_tokens tokens (not if a file holds the same tokens); files it
  // supersedes are removed, then the oldest beyond the budget. Failures are logged.
  void save(const PrefixSource& state, const char* why);
  void save(const SequenceState& state, const char* why) { save(view(state), why); }

  size_t files() const { return index_.size(); }
  int64_t bytes() const;
  int64_t loads() const { return loads_; }
  int64_t saves() const { return saves_; }
  int64_t failures() const { return failures_; }

 private:
  struct File {
    std::filesystem::path path;
    std::vector<int32_t> tokens;
    int64_t length = 0, min_length = 0, bytes = 0;
    int64_t last_used = 0;          // a counter: larger is more recent
  };
  void read_index();
  std::optional<File> read_header(const std::filesystem::path& path);
  void drop(size_t i, const std::string& why);
  void enforce_budget(const std::filesystem::path& keep);
  std::string prefix() const;       // of our file names

  Options options_;
  SpeculativeDecoder& decoder_;
  Log log_;
  std::vector<File> index_;
  int64_t clock_ = 0, loads_ = 0, saves_ = 0, failures_ = 0;
};

}  // namespace dsv4
