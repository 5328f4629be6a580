// Weights of the `mirror` presets: a target whose next token really depends on its context,
// and an MTP module that agrees with it most of the time, but not always — the regime of a
// real DeepSeek-V4, where most verification steps accept some drafts and roll back the rest.
//
// Construction (t = position, x_t = token, e_x = embed[x]):
// - Embedding rows have RMS 1; the head is the successor head of the aligned preset
//   (head row v = alpha * e_{f^-1(v)} / |e|, f a random permutation), so the residual e_x
//   votes for f(x) (long cycles: no short greedy loops).
// - Layer 0 is a window layer with a strong attention output a_t (its wo_b scaled so that
//   |a_t| is about the size at which a_t's vote over V random head rows competes with the
//   residual's vote for f(x_t)): the target's token is f(x_t) or a context-dependent
//   token, depending on the last `sliding_window` tokens. Its routed experts are all the
//   same expert, so routing (hash or biased) does not change its output.
// - The other layers (window, CSA, HCA) are random with their output projections (wo_b,
//   shared and routed w2) scaled by `coupling`: small, non-zero, context-dependent
//   contributions δ that the MTP does not model.
// - hc_head has fn = 0 and equal bases, so y = p·Σ_j X_j: the doubly stochastic stream
//   mixing of the later layers' hc_post leaves y unchanged (Σ_k C_jk = 1).
// - The MTP block is a copy of layer 0 (every mtp.0.<block tensor> = layers.0.<same>),
//   enorm = 1 and e_proj = I (FP8 1.0 × 2^0), so its input at position t is
//   fp8(e_{x_{t+1}}) on every stream — layer 0's input at position t+1 up to the FP8
//   rounding of the activation — plus h_proj·hnorm(X_t) with h_proj small and random
//   (the MTP depends on the target's streams, so a stale MTP row changes its logits).
//   Its KV row at position s is layer 0's row at s+1 (rows depend on relative positions
//   only: RoPE), so past the first window its attention reproduces layer 0's at t+1, its
//   hc_head and norm are the target's, and its logits are the target's logits at t+1 —
//   the prediction of x_{t+2} — without δ. Drafts are rejected where δ (or the FP8
//   rounding, or h_proj) tips a close call: often enough for partial acceptance.
// - `perturb` X adds noise to the MTP: e_proj = I + X·G, G ~ N(0, 1/D), lowering acceptance.
#pragma once
#include <cstdint>
#include <vector>

#include "checkpoint/weight_jobs.h"
#include "io/config.h"

namespace dsv4 {

struct MirrorOptions {
  double perturb = 0.0;     // X in e_proj = I + X·G
  float context = 8.0f;     // layer 0's attention strength (see layer0_wo_b_std)
  float coupling = 0.08f;   // scale of the other layers' output projections
  float h_proj = 0.02f;     // RMS of the MTP's h_proj(hnorm(X)) term (e_proj's is 1)
  float alpha = 4.0f;       // norm of the head rows
};

std::vector<WeightJob> mirror_weight_jobs(const ModelConfig& config, bool with_mtp, uint64_t seed,
                                          const MirrorOptions& options);

}  // namespace dsv4
