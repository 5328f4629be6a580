// The bounded greedy head (model/argmax_head.h): the 8-bit copy's estimate is within each row's
// slack of the exact head's logit, the rows it keeps hold the exact head's values bit for bit and
// always include the argmax (ties too), it prunes most rows, and decoding with it emits exactly
// the full head's tokens — plain and speculative — while sampling and logprobs keep the full head.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "core/number_formats.h"
#include "core/workspace.h"
#include "engine/argmax_head_copy.h"
#include "speculative/sampler.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

struct TiedHead {
  std::vector<uint16_t> bits;
  WeightView view;
};
TiedHead tied_head(int64_t rows, int64_t cols, uint64_t seed) {
  TiedHead h;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  h.bits.resize(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) h.bits[size_t(r * cols + c)] = f32_to_bf16(std::ldexp(normal(rng), int(r % 5) - 7));
  // Rows 40 and 41 equal row 7: exact ties with it, whatever the input.
  for (int64_t r : {40, 41}) std::copy_n(h.bits.begin() + 7 * cols, cols, h.bits.begin() + r * cols);
  h.view.format = WeightFormat::BF16;
  h.view.rows = rows;
  h.view.cols = cols;
  h.view.data = reinterpret_cast<const uint8_t*>(h.bits.data());
  h.view.label = "test.head";
  return h;
}

TEST(BoundedHead, KeepsTheArgmaxWithExactValuesAndPrunesTheRest) {
  const int64_t V = 3000, D = 256, m = 24;
  const TiedHead head = tied_head(V, D, 5);
  const ArgmaxHeadCopy copy(head.view, 2);
  auto backend = test::make_test_backend();
  Workspace ws(*backend);
  Pass p{*backend, ws};

  // Inputs as the head gets them (bf16 values); row 0 points at row 7, so that rows 7, 40 and 41
  // tie for its argmax.
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> y(size_t(m * D));
  for (float& v : y) v = round_bf16(normal(rng));
  for (int64_t k = 0; k < D; ++k) y[size_t(k)] = round_bf16(64.0f * bf16_to_f32(head.bits[size_t(7 * D + k)]));
  Tensor ty = p.alloc({m, D});
  backend->from_host(ty, y.data());

  // The full head, and the copy's estimate (the two planes' sums) with its slack.
  Tensor full = p.alloc({m, V}), hi = p.alloc({m, V}), lo = p.alloc({m, V});
  const ArgmaxHead ah = copy.view();
  backend->linear(ty, head.view, full, {ActQuant::None, false});
  backend->linear(ty, ah.hi, hi, {ActQuant::None, false});
  backend->linear(ty, ah.lo, lo, {ActQuant::None, false});
  std::vector<float> want(size_t(m * V)), a_hi(size_t(m * V)), a_lo(size_t(m * V));
  backend->to_host(full, want.data());
  backend->to_host(hi, a_hi.data());
  backend->to_host(lo, a_lo.data());
  double worst = 0.0;  // the largest |L − A| / (‖x‖·c) seen: must stay ≤ 1, and the bound should not be slack by orders
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0.0;
    for (int64_t k = 0; k < D; ++k) ss += double(y[size_t(i * D + k)]) * y[size_t(i * D + k)];
    for (int64_t r = 0; r < V; ++r) {
      const size_t at = size_t(i * V + r);
      const double err = std::fabs(double(want[at]) - (double(a_hi[at]) + a_lo[at]));
      worst = std::max(worst, err / (std::sqrt(ss) * ah.slack[size_t(r)]));
    }
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_GT(worst, 0.01);

  std::vector<float> logits;
  ArgmaxHeadScratch scratch;
  ArgmaxHeadCounts counts;
  ASSERT_TRUE(bounded_argmax_logits(p, ty, ah, head.view, V, 4096, logits, scratch, counts));
  ASSERT_EQ(logits.size(), size_t(m * V));
  EXPECT_EQ(counts.rows, m);
  EXPECT_EQ(counts.fallbacks, 0);
  EXPECT_GE(counts.candidates, m);
  EXPECT_LT(counts.candidates, m * V / 10) << "the bound should prune most rows";
  for (int64_t i = 0; i < m; ++i) {
    const std::span<const float> row_want(want.data() + i * V, size_t(V)), row_got(logits.data() + i * V, size_t(V));
    EXPECT_EQ(argmax_token(row_got, {}), argmax_token(row_want, {})) << "row " << i;
    for (int64_t r = 0; r < V; ++r)
      if (!std::isinf(row_got[size_t(r)])) {
        EXPECT_EQ(std::bit_cast<uint32_t>(row_got[size_t(r)]), std::bit_cast<uint32_t>(row_want[size_t(r)]))
            << "row " << i << ", logit " << r;
      }
  }
  // The tie: rows 7, 40 and 41 all kept, and the argmax is the first of them, as the full head's.
  for (int64_t r : {7, 40, 41}) EXPECT_FALSE(std::isinf(logits[size_t(r)])) << r;
  EXPECT_EQ(argmax_token(std::span<const float>(logits.data(), size_t(V)), {}), 7);

  // Too many candidates for the cap: the pass is handed back to the full head, logits untouched.
  std::vector<float> untouched(3, 1.0f);
  EXPECT_FALSE(bounded_argmax_logits(p, ty, ah, head.view, V, 1, untouched, scratch, counts));
  EXPECT_EQ(counts.fallbacks, 1);
  EXPECT_EQ(untouched, std::vector<float>(3, 1.0f));
}

TEST(BoundedHead, RefusesAHeadItCannotCopy) {
  TiedHead head = tied_head(64, 256, 1);
  head.view.cols = 200;  // not groups of 128
  EXPECT_FALSE(ArgmaxHeadCopy::possible(head.view));
  EXPECT_THROW(ArgmaxHeadCopy(head.view, 1), Error);
}

// Decoding: the bounded head's tokens are the full head's, plain and speculative, on a mirror
// checkpoint (drafts partly accepted). It serves passes of up to two logit rows (two sequences
// decoding, or one verifying one draft), every one of their rows; passes of more rows, sampled
// runs and runs with logprobs take the full head.
TEST(BoundedHead, DecodingEmitsTheFullHeadsTokens) {
  const auto dir = test::generated_checkpoint("bounded_mirror", "mirror", 3, {}, {}, test::kTestPerturb);
  auto bounded = Engine::open(dir, {.backend = test::test_backend(), .max_rollback = 16});
  auto full = Engine::open(dir, {.backend = test::test_backend(), .max_rollback = 16, .argmax_head = false});
  ASSERT_NE(bounded->argmax_head, nullptr);
  ASSERT_EQ(full->argmax_head, nullptr);
  const int64_t V = bounded->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(7, V, 1), test::random_prompt(30, V, 2)};
  GenerateOptions o;
  o.max_new_tokens = 48;
  const auto want = test::generate(*full, prompts, o);
  EXPECT_EQ(full->target->argmax_head_counts().rows, 0);
  struct Run {
    int k;
    size_t sequences;
    bool bounded;  // every pass has at most two logit rows
  };
  for (const Run& run : {Run{0, 2, true}, Run{1, 1, true}, Run{2, 1, false}}) {
    const std::string what = "k = " + std::to_string(run.k) + ", " + std::to_string(run.sequences) + " sequences";
    o.draft_tokens = run.k;
    const std::vector<std::vector<int32_t>> batch(prompts.begin(), prompts.begin() + long(run.sequences));
    const ArgmaxHeadCounts before = bounded->target->argmax_head_counts();
    DecodeMetrics metrics;
    const auto got = test::generate(*bounded, batch, o, &metrics);
    for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << what << ", sequence " << i;
    const ArgmaxHeadCounts& after = bounded->target->argmax_head_counts();
    if (run.bounded) {
      // Every logit row of the decode passes (k + 1 per pass and sequence).
      EXPECT_GE(after.rows - before.rows, int64_t(batch.size()) * (o.max_new_tokens / (run.k + 1))) << what;
      EXPECT_EQ(after.fallbacks, before.fallbacks) << what;
      EXPECT_LT(after.candidates - before.candidates, (after.rows - before.rows) * V / 4) << what;
    } else {
      // Only the passes of at most two rows: the prompt's last row, and the last steps, which
      // draft fewer than k (at most 2 rows, then 1).
      EXPECT_LE(after.rows - before.rows, 5) << what;
    }
    if (run.k > 0) {
      EXPECT_GT(metrics.accepted, 0) << what;
      EXPECT_GT(metrics.drafted, metrics.accepted) << what;
    }
  }
  // Sampling reads the distribution: the full head, bounded head untouched.
  o.draft_tokens = 0;
  o.sampling.temperature = 0.8f;
  const int64_t rows = bounded->target->argmax_head_counts().rows;
  test::generate(*bounded, prompts, o);
  EXPECT_EQ(bounded->target->argmax_head_counts().rows, rows);
  // Greedy with logprobs too.
  o.sampling.temperature = 0.0f;
  o.top_logprobs = 2;
  const auto with_logprobs = test::generate(*bounded, prompts, o);
  EXPECT_EQ(bounded->target->argmax_head_counts().rows, rows);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(with_logprobs[i].tokens, want[i].tokens);
}

}  // namespace
}  // namespace dsv4
