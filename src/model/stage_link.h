// The target split into pipeline stages, each in its own process (the transport: distributed/).
//
// Stage 0 — the process that schedules — holds the embedding, the first layers, the head and the
// drafter; stage s > 0 holds layers [first_layer(s), first_layer(s + 1)). A pass runs as
// micro-batches of whole sequences: stage 0 embeds one and runs its layers, sends the streams on
// and starts the next while stage 1 works; the last stage sends each micro-batch's final streams
// (the rows the head or the drafter reads) back to stage 0, which runs the head over all of them
// at once. Every row's bits are those of a single-process pass: a row never depends on what else
// shares its batch, and the streams cross as the f32 values they are.
//
// A message carries one micro-batch: the sequences' cache operations since the last pass (the
// first micro-batch of a pass: cache/cache_journal.h), its requests, the streams of its rows, and
// the DSpark taps of its kept rows so far (tap-major: [taps][kept rows][D]).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cache/cache_journal.h"

namespace dsv4 {

struct StageMessage {
  std::vector<int64_t> header;
  std::vector<float> streams;  // [rows, hc·D]
  std::vector<float> taps;     // [taps, kept rows, D]
};

// The header's requests (what Transformer::Request says, with the sequence by journal id).
struct StageRequest {
  int64_t sequence = 0;
  std::vector<int32_t> tokens;
  bool all_logits = false, no_logits = false, prompt = false, streams = true;
  int64_t streams_from = 0;
};
struct StageHeader {
  enum Kind : int64_t { Pass = 1, Stop = 2 };
  Kind kind = Pass;
  int64_t pass = 0, micro_batch = 0;
  std::vector<CacheOp> ops;
  std::vector<StageRequest> requests;
  // Stop: what each stage measured (stage_stats_words per stage, appended as it goes round).
  std::vector<int64_t> stats;
};
std::vector<int64_t> encode_stage_header(const StageHeader& h);
StageHeader decode_stage_header(std::span<const int64_t> words);  // throws naming what is malformed

// What a stage measured over the run: its own passes and the messages it sent.
struct StageStats {
  int64_t passes = 0, rows = 0;
  double compute_seconds = 0, wait_seconds = 0, send_seconds = 0;
  int64_t bytes_sent = 0, messages_sent = 0;
  int64_t split_passes = 0;  // stage 0: passes cut into more than one micro-batch
  static constexpr size_t kWords = 8;
  void append_to(std::vector<int64_t>& words) const;
  static StageStats read(std::span<const int64_t> words);
};

class StageLink {
 public:
  virtual ~StageLink() = default;
  virtual int stages() const = 0;
  virtual int stage() const = 0;
  // The first layer of stage s; first_layer(stages()) is the layer count.
  virtual int64_t first_layer(int s) const = 0;
  // To the next stage (the last stage: to stage 0); returns when the message may be reused.
  virtual void send_next(StageMessage&& m) = 0;
  // From the previous stage (stage 0: from the last), in the order they were sent.
  virtual StageMessage receive_previous() = 0;
  // The scheduler's journal (stage 0: its target caches record into it).
  virtual const std::shared_ptr<CacheJournal>& journal() const = 0;
  virtual StageStats& stats() = 0;
};

}  // namespace dsv4
