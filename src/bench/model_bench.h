// `dsv4 bench`'s measurements on a loaded checkpoint: the MTP draft step, one decode step per
// layer kind at a real context (prefilled), verification (extend) passes of several tokens,
// the LM head, and end-to-end speculative generation. Times are medians of repetitions.
//
// A layer is timed alone by running its Block::forward on a Pass over the prefilled sequence
// (its inputs captured from a traced forward of the same tokens); the cache rows it writes at
// the new positions are the same on every repetition, so each one sees the same state.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "spec/engine.h"

namespace dsv4::bench {

struct StepFigures {
  double ms = 0;               // median
  int64_t weight_bytes = 0;    // weights read (selected experts only)
  int64_t cache_bytes = 0;     // cache rows read
  int64_t bytes() const { return weight_bytes + cache_bytes; }
  double gbs() const { return ms > 0 ? double(bytes()) / (ms * 1e-3) / 1e9 : 0; }
};

struct LayerKind {
  std::string name;            // "window", "csa", "hca", "mtp_block"
  int64_t ratio = 0;
  int64_t layer = -1;          // target layer index (-1: the MTP block)
  StepFigures decode;          // one token
  std::map<int64_t, StepFigures> extend;  // rows → one pass over that many tokens
  std::map<int64_t, int64_t> experts;     // rows → distinct routed experts selected
};

struct ModelBenchOptions {
  int64_t context = 4096;
  int reps = 7;
  int64_t prefill_chunk = 256;
  int64_t mtp_vocab = 32768;
  std::vector<int64_t> extend_rows = {2, 3, 4, 5, 8};
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // may be empty
};

struct ModelBenchResult {
  int64_t context = 0;
  double prefill_seconds = 0;
  StepFigures draft, draft_vocab;          // MTP draft step: full head, and the first mtp_vocab rows
  int64_t mtp_vocab = 0;
  std::vector<LayerKind> kinds;            // kinds present in the checkpoint, then the MTP block
  StepFigures decode_step;                 // this checkpoint's whole decode step (its layers + head)
  std::map<int64_t, StepFigures> head;     // rows → hc_head + norm + LM head
  StepFigures embed;                       // (not timed: bytes of one row)
};

ModelBenchResult run_model_bench(Engine& engine, const ModelBenchOptions& options);

// Speculative decoding end to end: greedy generation with k drafts per step.
struct EndToEnd {
  int k = 0;
  double tokens_per_s = 0;
  double acceptance = 0;          // accepted / drafted
  double mean_accepted_length = 0;  // tokens per verification step
};
std::vector<EndToEnd> run_end_to_end(Engine& engine, const std::vector<int>& ks, int64_t prompt_tokens,
                                     int64_t new_tokens, uint64_t seed);

// Median wall time (ms) of fn() over `reps` runs after `warmup` runs.
double time_ms(const std::function<void()>& fn, int reps, int warmup = 1);

}  // namespace dsv4::bench
