// A rounded LM head corrected where it matters. The MTP may draft with a rounded copy of the
// head (engine/draft_head.h: a quarter of the bytes with INT4), whose logits are off by a few
// percent: enough to swap close calls. Recomputing each row's `top` largest logits with the
// exact head's rows makes the row's argmax the exact head's whenever that token is among the
// copy's top — a greedy draft is then the target head's own — for `top` rows of reads (64 of
// 129,280: 0.5 MB against the head's 1 GB). Sampled drafts stay valid: they are drawn from the
// corrected row and report it as their distribution.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "model/pass.h"

namespace dsv4 {

// Host buffers of a rescoring, kept by its owner so that a draft pass allocates nothing.
struct HeadRescoreScratch {
  std::vector<int64_t> picked, row_top;
  std::vector<std::pair<float, int64_t>> heap;
  std::vector<float> values;
};

struct HeadRescore {
  const WeightView* exact = nullptr;  // the exact head (BF16 or F32 rows), at least as many rows as the copy
  int64_t top = 0;                    // logits per row recomputed (0: none)
  HeadRescoreScratch* scratch = nullptr;  // (null: buffers of the call's own)
  bool enabled() const { return exact != nullptr && top > 0; }
};

// The indices of the k largest of v[0, n) (k ≤ n; NaNs never chosen), in no particular order;
// `heap` is working storage.
void top_k_indices(const float* v, int64_t n, int64_t k, std::vector<int64_t>& out,
                   std::vector<std::pair<float, int64_t>>& heap);
inline void top_k_indices(const float* v, int64_t n, int64_t k, std::vector<int64_t>& out) {
  std::vector<std::pair<float, int64_t>> heap;
  top_k_indices(v, n, k, out, heap);
}

// logits [m, vocab] (host) from head input y [m, D]: each row's `top` largest entries replaced by
// y_i · exact row, computed by the backend as the exact head's own pass computes them.
void rescore_top_logits(Pass& p, const Tensor& y, const HeadRescore& rescore, int64_t vocab,
                        std::vector<float>& logits);

}  // namespace dsv4
