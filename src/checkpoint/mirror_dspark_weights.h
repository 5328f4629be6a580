// Weights of the `mirror-dspark` presets: the `mirror` preset's target built with a weaker layer-0
// attention (`context`, below), and a DSpark drafter (DeepSeek-V4-Flash-0731, dspark.md) whose
// drafts follow the target's successor chain, so that they are accepted often but not always.
//
// The target: mirror_weight_jobs with MirrorOptions::context = MirrorDSparkOptions::context, every
// other constant as given. Its tensors are byte-identical to what `mirror` writes for the same seed
// and the same MirrorOptions (fills keyed by (seed, tensor name, chunk)); against `mirror`'s defaults
// only layers.0.attn.wo_b differs (its std is proportional to context). Why not mirror's context 8:
// there layer 0's attention output is ~20x the residual at the head (measured: |sum of streams|
// 1486 vs |4 e_x| 64 on tiny), so the next token is the context's and follows the successor f(x)
// 3.5% of the time; a DSpark drafter cannot rebuild that attention (its ring rows are projections of
// the tapped streams, in which the residual e_x is buried under the attention output, while layer
// 0's keys are functions of e_x alone), and its drafts were accepted 2-7% of the time. At context
// 2.75 the target follows its successor 73-95% of the time (seeds 1, 3, 7, 11) and leaves it where
// the context says so.
//
// The drafter (f = the head's successor permutation, aligned_successor(config, seed); u_x a random
// unit vector in R^r per token x, r = dspark_markov_rank; alpha = the head rows' norm):
// - Markov head: W1[x] = u_x, W2[v] = beta · u_{f^-1(v)}. The bias W2 · W1[prev] is beta at
//   f(prev) and beta · cos(u_{f^-1(v)}, u_prev) ~ N(0, beta²/r) elsewhere: its largest over the
//   vocabulary is about beta · sqrt(2 ln V / r) (0.41 · beta at tiny's V = 1024, r = 64; 0.30 · beta
//   at V4-Flash's V = 129280, r = 256), so f(prev) wins by a margin of about half of beta.
// - The block's own logits small: its rows are embed(anchor) and embed(noise) (the target's RMS-1
//   rows) and the stages keep them close (below), so head(norm(x)) votes for f(anchor) on row 0 and
//   for f(noise) on the noise rows, with logit alpha · sqrt(D) · gamma, gamma the last stage's
//   norm weight. With the target's norm weight 1 that vote is alpha · sqrt(D) (64 at tiny's
//   D = 256, 256 at V4-Flash's 4096) and would make every noise row draft f(noise); so gamma =
//   base_vote / (alpha · sqrt(D)) bounds every base logit by base_vote (default 2), below beta.
//   Row 0's vote agrees with the Markov bias (f(anchor)); the noise rows' vote for f(noise) loses.
// - Stages near the identity: their output projections (attn.wo_b, shared and routed w2) scaled
//   by `coupling` (as the mirror's later layers); every other stage tensor random as in the random
//   preset (main_proj included: the context rows reach the block through the small wo_b only);
//   norms 1; the last stage's hc_head fn 0 with equal bases (an even mix of the streams).
// - The confidence head random (as tiny-dspark-a's): it says nothing about acceptance here.
// So the drafts are f(anchor), f(f(anchor)), ...: draft k is accepted where the target followed its
// successor k times in a row. Measured on tiny (greedy, 4 drafts, 3 prompts x 300 tokens, the
// drafter as first implemented): successor rate over seeds 1, 3, 7, 11 and acceptance by draft
// position 1 and 4 over seeds and prompts:
//   context 8 (mirror's)  successor 3.5% (seed 3)   position 1: 0.02-0.07  position 4: 0.00
//   context 3             successor 56-93%          position 1: 0.43-0.90  position 4: 0.04-0.76
//   context 2.75          successor 73-95%          position 1: 0.44-0.97  position 4: 0.15-0.89  (default)
//   context 2.5           successor 84-98% (1,3,7)  position 1: 0.80-0.97  position 4: 0.42-0.93
// `perturb` X: a fraction X of the tokens (drawn per token from the seed) get a wrong successor in
// the Markov head (W1[x] = u_y, y another random token), lowering acceptance by about X per draft.
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/mirror_weights.h"
#include "checkpoint/weight_jobs.h"
#include "io/config.h"

namespace dsv4 {

struct MirrorDSparkOptions {
  float context = 2.75f;    // the target's MirrorOptions::context (see above; mirror's default is 8)
  double perturb = 0.0;     // X: the fraction of tokens with a wrong Markov successor
  float beta = 8.0f;        // the Markov bias at f(prev)
  float base_vote = 2.0f;   // the largest logit of the block's own rows: gamma · alpha · sqrt(D)
  float coupling = 0.08f;   // scale of the stages' output projections
};

// The target's jobs are mirror_weight_jobs(config, false, seed, target) with target.context =
// drafter.context (target.perturb is not used: it is the MTP's); the drafter's follow when
// `with_mtp`. The config must have DSpark.
std::vector<WeightJob> mirror_dspark_weight_jobs(const ModelConfig& config, bool with_mtp, uint64_t seed,
                                                 const MirrorOptions& target, const MirrorDSparkOptions& drafter);

}  // namespace dsv4
