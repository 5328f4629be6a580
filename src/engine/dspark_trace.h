// Teacher-forced DSpark drafting over a token sequence, as DeepSeek's reference runs it for its
// golden data (tests/data/tiny-dspark-a/README.md, "Protocol"): the target prefills the first P
// tokens and the drafter's rings take every prompt position; then for each s = P-1 .. T-2 the
// target decodes token s (when s >= P), the rings take position s, and a block is drafted with
// anchor tokens[s+1] at position s+1 — its drafts the drafter's own greedy choices. The anchors
// are the sequence's tokens, whatever was drafted. `dsv4 score` writes it under the golden's
// tensor names; the golden tests compare it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace dsv4 {

struct DSparkTrace {
  int64_t tokens = 0, prompt = 0, steps = 0;   // T, P, T - P
  int64_t block = 0, vocab = 0, hidden = 0, taps_width = 0, stages = 0, window = 0, head_dim = 0, top_k = 0;
  std::vector<float> target_logits;        // [steps + 1, V]: after the prefill, then after each decoded token
  std::vector<float> main_hidden;          // [T, taps·D]: the target's taps of every position
  std::vector<float> main_x;               // [T - 1, D]: the context projection of positions 0 .. T-2
  std::vector<float> ring_after_prefill;   // [stages, W, head_dim]: slot p % W holds position p (0 if unfilled)
  std::vector<int64_t> step_pos;           // [steps]: s
  std::vector<int64_t> draft_ids;          // [steps, B + 1]: the anchor, then the greedy drafts
  std::vector<float> logits, base_logits;  // [steps, B, V]: with and without the Markov bias
  std::vector<float> confidence;           // [steps, B]: raw logits
  std::vector<float> head_hidden;          // [steps, B, D]
  std::vector<float> margins;              // [steps, B]: top-1 minus top-2 of each logits row
  // With traced steps: the stages' expert choices [steps, stages, B, k], and the full hc state
  // after each stage at the steps asked for [those steps, stages, B, hc, D].
  std::vector<int64_t> gate_indices;
  std::vector<float> stage_out;
};

// Needs an engine with a DSpark drafter (throws otherwise) and at least P + 1 tokens. With
// `trace_stages`, every draft pass is traced for gate_indices and the stage outputs of the steps
// in `stage_out_steps`.
DSparkTrace dspark_teacher_forced(Engine& engine, std::span<const int32_t> tokens, int64_t prompt,
                                  bool trace_stages = false, std::span<const int64_t> stage_out_steps = {});

}  // namespace dsv4
