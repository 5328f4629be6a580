// A bounded greedy head: the exact head's argmax for a fraction of its reads.
//
// Greedy decoding only needs each row's argmax, not its 129,280 logits. An 8-bit copy of the
// head (two INT4 planes: w ≈ hi + lo, lo the residual at 1/16 of hi's scale; 0.53 GB against
// the BF16 head's 1.06 GB) gives an estimate A_r of every logit, and for each row r of the head
// a slack c_r, fixed when the copy is made, such that the exact head's logit L_r = x · w_r (as
// its own kernel computes it, in fp32) satisfies
//     |L_r − A_r| ≤ ‖x‖₂ · c_r,      c_r = ‖w_r − (hi_r + lo_r)‖₂ + 2⁻¹¹ (‖w_r‖₂ + ‖hi_r‖₂ + ‖lo_r‖₂)
// (Cauchy–Schwarz for the copy's error; the second term covers the rounding of either fp32 sum
// over ≤ 4096 products, whose worst case is 4096 · 2⁻²⁴ = 2⁻¹² of Σ|x_i w_i| ≤ ‖x‖₂‖w_r‖₂).
// So no row whose A_r + ‖x‖c_r lies below max_s(A_s − ‖x‖c_s) can be the argmax: the remaining
// candidates — typically tens to hundreds of rows — are computed exactly with the head's own
// kernel, the same sums as a full pass, and the row's logits are those exact values at the
// candidates and −∞ elsewhere: its argmax (ties included) is the full head's, bit for bit.
//
// Only for rows whose consumer takes the argmax and nothing else (greedy, no mask over the
// vocabulary, no logprobs): anything that reads a distribution gets the full head.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/pass.h"

namespace dsv4 {

struct ArgmaxHead {
  WeightView hi, lo;             // INT4 planes, [vocab rows, D]
  std::span<const float> slack;  // c_r per row (rounded up)
  bool enabled() const { return hi.present() && lo.present(); }
};

// What the bounded head did (cumulative): rows it served, exact rows it computed for them, and
// rows it handed back to the full head (candidates too many, or values not finite).
struct ArgmaxHeadCounts {
  int64_t rows = 0, candidates = 0, fallbacks = 0;
};

// Host buffers of the bounded head, kept by its owner so that a pass allocates nothing.
struct ArgmaxHeadScratch {
  std::vector<float> estimate, lo, exact, y;
  std::vector<int64_t> picked, begin;
};

// Rows of y [m, D] (the head's input, bf16 values): fills `logits` [m, vocab] with exact values at
// each row's candidates and −∞ elsewhere and returns true, or returns false (logits untouched)
// where a row has more than `max_candidates` candidates or non-finite values: the caller then
// runs the full head.
bool bounded_argmax_logits(Pass& p, const Tensor& y, const ArgmaxHead& head, const WeightView& exact,
                           int64_t vocab, int64_t max_candidates, std::vector<float>& logits,
                           ArgmaxHeadScratch& scratch, ArgmaxHeadCounts& counts);

}  // namespace dsv4
