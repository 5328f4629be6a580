// `dsv4 bench`'s measurements on a loaded checkpoint: the MTP draft step, one decode step per
// layer kind at a real context (prefilled), verification (extend) passes of several tokens,
// the LM head, and end-to-end speculative generation. Times are medians of repetitions; every
// repetition decodes tokens of its own (new experts, as in generation), and a decode step
// repeated on one token (the same experts, warm) is timed beside it.
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

#include "dsv4_bench/weight_bytes.h"
#include "engine/engine.h"
#include "speculative/draft_length.h"

namespace dsv4::bench {

struct StepFigures {
  double ms = 0;               // median
  int64_t weight_bytes = 0;    // weights read (selected experts only)
  FormatBytes format_bytes;    // the same by weight format (decode steps; for the arithmetic model)
  int64_t cache_bytes = 0;     // cache rows read
  double bandwidth_gbs = 0;    // median of the bandwidth samples taken before each repetition
  std::vector<double> rep_ms, rep_bandwidth_gbs;  // each repetition and the sample just before it
  int64_t bytes() const { return weight_bytes + cache_bytes; }
  double gbs() const { return ms > 0 ? double(bytes()) / (ms * 1e-3) / 1e9 : 0; }
  // Median over repetitions of (this repetition's GB/s) / (the bandwidth sampled just before it):
  // the machine's bandwidth drifts (neighbours on the host), so each run is held to its own.
  double fraction_of_bandwidth() const;
  // Median over repetitions of this step's time / base's time in the same repetition (steps timed
  // interleaved); the ratio of medians without per-repetition times.
  double time_ratio(const StepFigures& base) const;
};

struct LayerKind {
  std::string name;            // "window", "csa", "hca", "mtp_block"
  int64_t ratio = 0;
  int64_t layer = -1;          // target layer index (-1: the MTP block)
  StepFigures decode;          // one token, a new one every repetition (new experts, as generation runs)
  StepFigures decode_repeated; // the same token every repetition: the same experts, their pages warm
  std::map<int64_t, StepFigures> extend;  // rows → one pass over that many tokens (new ones each repetition)
  std::map<int64_t, int64_t> experts;     // rows → distinct routed experts selected (mean over repetitions)
  // One pass over `same_rows` copies of the decode row (its input and token): every row selects
  // the decode row's experts, so the pass reads the decode step's bytes. Its cost over one
  // decode step is what a verification costs apart from the extra experts other tokens route to.
  StepFigures extend_same;
  int64_t same_rows = 0;
};

struct ModelBenchOptions {
  int64_t context = 4096;
  int reps = 7;
  int64_t prefill_chunk = 256;
  int64_t mtp_vocab = 32768;
  std::vector<int64_t> extend_rows = {2, 3, 4, 5, 8};
  int64_t same_rows = 4;  // LayerKind::extend_same (0: not measured)
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // may be empty
  std::function<double()> bandwidth;                  // one bandwidth sample (GB/s) before each repetition; may be empty
};

struct ModelBenchResult {
  int64_t context = 0;
  double prefill_seconds = 0;
  // Per target layer after the prefill: the bytes its cache holds, and what layer_cache_footprint
  // says it may hold at this context (its bytes per token, and the bound).
  std::vector<int64_t> cache_bytes, cache_bound;
  std::vector<double> cache_bytes_per_token;
  StepFigures draft, draft_vocab;          // MTP draft step: full head, and the first mtp_vocab rows
  StepFigures draft_fp8, draft_int4;       // the draft step with an FP8 / INT4 copy of the head (empty: not BF16/F32)
  int64_t mtp_vocab = 0;
  std::vector<LayerKind> kinds;            // kinds present in the checkpoint, then the MTP block
  StepFigures decode_step;                 // this checkpoint's whole decode step (its layers + head)
  std::map<int64_t, StepFigures> head;     // rows → hc_head + norm + LM head
  StepFigures embed;                       // (not timed: bytes of one row)
  std::vector<double> bandwidth_samples;   // every sample taken during the run
};

ModelBenchResult run_model_bench(Engine& engine, const ModelBenchOptions& options);

// Speculative decoding end to end: greedy generation with k drafts per step, the k values
// run interleaved, `rounds` times (tokens/s is the median over rounds; greedy acceptance is
// the same in every round).
struct EndToEnd {
  int k = 0;                               // the most drafts a step verified (auto: the drafter's maximum)
  bool automatic = false;                  // --draft auto
  double tokens_per_s = 0;                 // median over rounds
  std::vector<double> round_tokens_per_s;
  double acceptance = 0;                   // accepted / drafted
  std::vector<double> acceptance_by_position;  // P(drafts 1..j all accepted)
  double mean_accepted_length = 0;         // tokens per verification step
  double partial_share = 0;                // steps accepting some drafts, not all
  double verified_per_step = 0;            // drafts verified per step (auto: what the scheduler chose)
  // auto (the last round's): steps by the drafts they verified, and the costs the verify scheduler
  // learned — ms of a target pass by rows, ms of a draft by drafted sequences (per depth for the MTP).
  std::vector<int64_t> verified_steps;
  std::vector<std::pair<int64_t, double>> pass_ms_by_rows, draft_ms;
  double expected_gain = 0;                // the scheduler's expected speed over plain decoding's
  std::string name() const { return automatic ? "auto" : std::to_string(k); }
};
std::vector<EndToEnd> run_end_to_end(Engine& engine, const std::vector<DraftLength>& lengths, int64_t prompt_tokens,
                                     int64_t new_tokens, uint64_t seed, int rounds = 1);

// Block::forward alone over rows at positions pos0.. of one sequence (x: the block input
// [rows, hc, D] on the host); the cache rows it writes are those a real pass would write.
void run_block(const Block& block, Backend& be, Workspace& ws, SequenceCache& seq, std::span<const int32_t> tokens,
               int64_t pos0, const std::vector<float>& x, int64_t hc, int64_t D);
// The input of every block for a forward of `tokens` appended to seq (undone afterwards).
std::vector<std::vector<float>> capture_block_inputs(Transformer& model, SequenceCache& seq,
                                                     std::span<const int32_t> tokens);

// Median wall time (ms) of fn() over `reps` runs after `warmup` runs.
double time_ms(const std::function<void()>& fn, int reps, int warmup = 1);

}  // namespace dsv4::bench
