// Weights of the `aligned` presets: the target is a deterministic function of the current
// token with large logit margins, and the MTP module provably predicts the token after next.
//
// Construction:
// - every block's output projections are zero (attn.wo_b, ffn.shared_experts.w2 and every
//   routed expert's w2: codes 0, scale 2^0), so a block adds nothing to the residual
//   streams: they start as copies of embed[t] and hc_post only mixes them with a
//   (nearly) doubly-stochastic matrix, so they stay ~ embed[t];
// - embed rows e_t ~ N(0, 1); a fixed random permutation f of the vocabulary (seeded);
//   head row v = alpha * e_{f^-1(v)} / ||e_{f^-1(v)}||, so the target's logits after the
//   final RMSNorm are alpha * sqrt(D) * cos(e_{f^-1(v)}, e_t): the next token after t is
//   f(t), with a margin of about alpha * (sqrt(D) - 3);
// - norm weights 1; hyper-connection, attention-input and router parameters random as in
//   the random preset (their effect is washed out by the zero output projections);
// - MTP: h_proj = 0, e_proj = identity (FP8 1.0 with scale 2^0), its block's output
//   projections zero, so it sees only enorm(embed[t+1]) and predicts f(t+1): exactly the
//   target's token after next.
// `perturb` X degrades the MTP by a controllable amount: e_proj = I + X * G with G random
// N(0, 1/D) entries (X ~ 1 makes its input mostly noise).
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/weight_jobs.h"
#include "io/config.h"

namespace dsv4 {

struct AlignedOptions {
  double perturb = 0.0;  // X in e_proj = I + X * G
  float alpha = 4.0f;    // norm of the head rows
};

// f: the target's token after t is f[t]. A permutation of [0, vocab_size).
std::vector<int64_t> aligned_successor(const ModelConfig& config, uint64_t seed);

// The two fills the successor construction rests on (shared with the mirror preset):
// embedding row t ~ N(0, 1) from its own stream (bf16-rounded), optionally rescaled to RMS
// exactly 1 before rounding; head row v = alpha * e_{f^-1(v)} / |e_{f^-1(v)}|.
FillValues successor_embed_fill(uint64_t seed, int64_t cols, bool unit_rms);
FillValues successor_head_fill(const ModelConfig& config, uint64_t seed, int64_t cols, bool unit_rms, float alpha);
// A square FP8 job (e_proj) = I + X·G, G ~ N(0, 1/D); exactly I (1.0 × 2^0 tiles) when X = 0.
void set_identity_plus_noise(WeightJob& job, float perturb);

std::vector<WeightJob> aligned_weight_jobs(const ModelConfig& config, bool with_mtp, uint64_t seed,
                                           const AlignedOptions& options);

}  // namespace dsv4
