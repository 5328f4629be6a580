// `dsv4 bench` on a DSpark checkpoint (DeepSeek-V4-Flash-0731's drafter): after a prefilled
// context, the draft step for K = 1..B drafts (one block pass through the stages, the target's LM
// head for K rows, K Markov rows and the confidence head: what DSparkProposer::propose runs), the
// block pass alone, the ring writes of n verified rows, and target passes of n = 1..B+1 rows (a
// verification of n-1 drafts) — each with the bytes it reads — timed interleaved, medians of
// repetitions, every repetition with tokens of its own.
#pragma once
#include <cstdint>
#include <functional>
#include <map>

#include "dsv4_bench/model_bench.h"

namespace dsv4::bench {

struct DSparkBenchOptions {
  int64_t context = 512;
  int reps = 5;
  int64_t prefill_chunk = 256;
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // may be empty
  std::function<double()> bandwidth;                  // a bandwidth sample before each repetition; may be empty
};

struct DSparkBenchResult {
  int64_t context = 0, block = 0, stages = 0;
  double prefill_seconds = 0;
  std::map<int64_t, StepFigures> draft;     // K drafts: a whole draft step
  StepFigures block_pass;                   // the block through the stages and hc_head, no LM head
  std::map<int64_t, StepFigures> ring_writes;  // n verified rows written to the rings (main_proj, each stage's wkv)
  std::map<int64_t, StepFigures> verify;    // a target pass of n rows (n = 1: a plain decode step)
  std::map<int64_t, StepFigures> head;      // the target's hc_head + norm + LM head on n rows (part of verify[n])
  int64_t stage_experts = 0;                // distinct routed experts the block's B rows select, summed over stages
  // Bytes of one draft step by part (weights; the rings' cache rows are counted in draft[K].cache_bytes).
  int64_t stage_dense_bytes = 0, stage_expert_bytes = 0, head_bytes = 0, markov_row_bytes = 0, confidence_bytes = 0,
          main_proj_bytes = 0;
  std::vector<double> bandwidth_samples;
};

DSparkBenchResult run_dspark_bench(Engine& engine, const DSparkBenchOptions& options);

}  // namespace dsv4::bench
