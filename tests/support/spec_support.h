// Helpers of the speculative-decoding tests: generated checkpoints and loaded engines.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "speculative/speculative_decoder.h"

namespace dsv4::test {

// A tiny checkpoint generated once per test binary run (cached by name in the scratch dir).
std::filesystem::path generated_checkpoint(const std::string& name, const std::string& preset, uint64_t seed,
                                           const std::vector<std::string>& set = {},
                                           const std::vector<int64_t>& ratios = {}, double perturb = 0.0);

// Generates with the given options (proposer used when draft_tokens > 0).
std::vector<SequenceOutput> generate(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                     const GenerateOptions& options, DecodeMetrics* metrics = nullptr);

std::vector<int32_t> random_prompt(int64_t length, int64_t vocab, uint64_t seed);

// The tiny `mirror` checkpoint (context-dependent target, MTP mirroring layer 0: partial
// acceptance), with the MTP perturbed by `perturb`. The tests' default, 0.05, accepts ~0.8
// of first drafts and has partial steps (0 < accepted < k) at every k >= 2.
constexpr double kTestPerturb = 0.05;
std::filesystem::path mirror_checkpoint(double perturb = kTestPerturb);

// The tiny `mirror-dspark` checkpoint (mirror's target with a weaker context, a DSpark drafter whose
// Markov head follows the target's successor), seed 7 as mirror_checkpoint(), with a fraction
// `perturb` of the tokens given a wrong Markov successor. The tests' default, 0.15, puts its seed's
// acceptance (~0.97 per draft unperturbed) in the partial regime: ~0.8 at the first draft.
constexpr double kTestDSparkPerturb = 0.15;
std::filesystem::path mirror_dspark_checkpoint(double perturb = kTestDSparkPerturb);

// prompt followed by the generated tokens.
std::vector<int32_t> concat(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated);

// One plain forward pass of the target over `tokens` on a fresh sequence: the logits of
// every row and the streams after the last block (teacher forcing), copied to the host.
struct TeacherForced {
  Transformer::Output out;     // (its `hidden` is gone with the next pass: use `hidden`)
  std::vector<float> hidden;   // [T, hc·D]
  const float* logits_row(size_t request, int64_t i) const { return out.logits_row(request, i); }
};
TeacherForced teacher_forced(Engine& engine, std::span<const int32_t> tokens);

// Logits of a fresh MTP chain: rows 0..L-1 from the target streams `hidden` ([≥ L, hc·D],
// host) and tokens all[1..L] (the draft at depth 1 is the last row's), then one row per draft
// from the MTP's own streams.
std::vector<std::vector<float>> mtp_chain(Engine& engine, const std::vector<float>& hidden,
                                          const std::vector<int32_t>& all, int64_t L,
                                          const std::vector<int32_t>& drafts);

// The corrected logits of a fresh DSpark draft after tokens all[0..L): rings from the target's taps
// of the prefix (prompt rows, positions < P, as a prompt), anchor all[L], then the Markov chain over
// `drafts` (row k's bias is that of draft k). One row per draft.
std::vector<std::vector<float>> dspark_fresh_draft(Engine& engine, const std::vector<int32_t>& all, int64_t P,
                                                   int64_t L, const std::vector<int32_t>& drafts);

// Bitwise equality of float rows.
bool same_bits(const float* a, const float* b, size_t n);

// Positions where both runs drafted: the first draft and its logits must be the same bits (gtest
// failures name the position); returns how many positions were compared.
int compare_first_drafts(const SequenceOutput& run, const SequenceOutput& reference);

}  // namespace dsv4::test
