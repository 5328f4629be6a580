// Token/position alignment of the MTP pipeline:
// - during generation, every step's first-draft logits equal (bit for bit) the row of the
//   teacher-forced MTP logits (`dsv4 score`'s mtp.logits) for that position: the draft KV
//   holds target-conditioned rows after the prefill and after every draft extend;
// - on the aligned preset (target = a fixed permutation of the current token, MTP = the
//   same permutation one token later) every draft position is accepted; degrading the MTP
//   with --perturb lowers acceptance. A one-position slip anywhere drops it to chance;
// - rows whose logits nobody asks for only extend the MTP's cache (the block's attention output
//   and MoE run for the logit rows alone), with the same bits as the full computation.
#include <gtest/gtest.h>

#include <cstring>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

TEST(MtpAlignment, FirstDraftLogitsEqualTeacherForcedMtpLogits) {
  for (int k : {1, 3}) {
    auto engine = Engine::open(test::tiny_a_dir(), {test::test_backend(), true, 0, 16});
    const int64_t V = engine->config().vocab_size;
    const std::vector<int32_t> prompt = test::random_prompt(19, V, 9);
    GenerateOptions o;
    o.max_new_tokens = 40;
    o.draft_tokens = k;
    o.record_steps = true;
    const auto out = test::generate(*engine, {prompt}, o);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), out[0].tokens.begin(), out[0].tokens.end());

    // Teacher forcing, as `dsv4 score` computes it: target over the whole sequence, then
    // the MTP over positions 0..T-2 in one call.
    auto seq = engine->target->new_sequence();
    Transformer::Output tout;
    Transformer::Request r{seq.get(), all, false};
    engine->target->forward(std::span(&r, 1), tout);
    auto mseq = engine->mtp->new_sequence();
    MtpModule::Output mout;
    const std::vector<float> hidden = tout.hidden_host();
    MtpModule::Request mr{mseq.get(), hidden.data(), std::span<const int32_t>(all.data() + 1, all.size() - 1), true};
    engine->mtp->forward(std::span(&mr, 1), mout);

    ASSERT_FALSE(out[0].steps.empty());
    size_t compared = 0;
    for (const StepRecord& step : out[0].steps) {
      if (step.drafts.empty()) continue;  // the last step: only the target's token was left to emit
      ++compared;
      const int64_t position = step.position - 1;  // the MTP row of the first draft: (X_{L-1}, x_L)
      ASSERT_LT(position, int64_t(all.size()) - 1);
      ASSERT_GE(step.draft_logits.size(), size_t(V));
      EXPECT_EQ(0, std::memcmp(step.draft_logits.data(), mout.logits_row(0, position), size_t(V) * 4))
          << "first draft at position " << position << " (k = " << k << ") differs from mtp.logits";
    }
    EXPECT_GE(compared + 1, out[0].steps.size());
    std::printf("k=%d: %zu steps' first-draft logits equal the teacher-forced MTP logits\n", k, compared);
  }
}

TEST(MtpAlignment, AlignedPresetAcceptsEveryDraft) {
  auto engine = Engine::open(test::generated_checkpoint("aligned", "aligned", 5), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(6, V, 1), test::random_prompt(17, V, 2)};
  GenerateOptions plain_options;
  plain_options.max_new_tokens = 64;
  const auto plain = test::generate(*engine, prompts, plain_options);
  for (int k = 1; k <= 4; ++k) {
    GenerateOptions o = plain_options;
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto out = test::generate(*engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out[i].tokens, plain[i].tokens) << "k = " << k;
    const auto by_position = m.acceptance_by_position();
    ASSERT_EQ(by_position.size(), size_t(k));
    EXPECT_GT(m.drafted_at[size_t(k - 1)], 20) << "k = " << k;
    std::printf("aligned, k=%d: acceptance by position", k);
    for (double a : by_position) std::printf(" %.3f", a);
    std::printf(", mean accepted length %.2f\n", m.mean_accepted_length());
    for (int j = 0; j < k; ++j) EXPECT_GE(by_position[size_t(j)], 0.99) << "k = " << k << ", draft position " << j + 1;
  }
}

TEST(MtpAlignment, PerturbedMtpIsAcceptedLess) {
  auto clean = Engine::open(test::generated_checkpoint("aligned", "aligned", 5), {test::test_backend(), true, 0, 16});
  auto noisy = Engine::open(test::generated_checkpoint("aligned_perturb4", "aligned", 5, {}, {}, 4.0), {test::test_backend(), true, 0, 16});
  const int64_t V = clean->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(6, V, 1), test::random_prompt(17, V, 2)};
  GenerateOptions o;
  o.max_new_tokens = 64;
  o.draft_tokens = 2;
  DecodeMetrics a, b;
  const auto ref = test::generate(*clean, prompts, o, &a);
  const auto out = test::generate(*noisy, prompts, o, &b);
  std::printf("acceptance: aligned %.3f, perturbed %.3f\n", a.acceptance_rate(), b.acceptance_rate());
  ASSERT_GT(a.drafted, 50);
  ASSERT_GT(b.drafted, 50);
  EXPECT_GT(b.accepted, 0) << "the perturbed MTP should still be right sometimes";
  EXPECT_LT(b.acceptance_rate(), 0.9);
  EXPECT_GT(a.acceptance_rate(), 0.99);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(out[i].tokens, ref[i].tokens) << "the target is unchanged";
}

TEST(MtpOutputRows, RowsWithoutLogitsOnlyExtendTheCache) {
  auto engine = Engine::open(test::tiny_a_dir(), {test::test_backend(), true, 0, 16});
  MtpModule& mtp = *engine->mtp;
  const int64_t V = mtp.vocab(), W = mtp.hidden_width(), n = 12;
  const std::vector<int32_t> all = test::random_prompt(n + 2, engine->config().vocab_size, 5);
  const test::TeacherForced tf = test::teacher_forced(*engine, all);
  const std::span<const int32_t> next(all.data() + 1, size_t(n));  // the token after each stream
  using Rows = std::pair<int64_t, int64_t>;  // rows through the module, and those past the caches
  struct Run {
    std::unique_ptr<SequenceCache> seq;
    MtpModule::Output out;
  };
  // One call; the rows it counted.
  auto call = [&](Run& run, const float* streams, std::span<const int32_t> tokens, bool all_logits, bool no_logits) {
    const MtpModule::Counts before = mtp.counts();
    MtpModule::Request r{run.seq.get(), streams, tokens, all_logits, no_logits};
    mtp.forward(std::span(&r, 1), run.out);
    return Rows(mtp.counts().rows - before.rows, mtp.counts().output_rows - before.output_rows);
  };

  Run full{mtp.new_sequence(), {}};  // every row's logits: every row through the whole block
  EXPECT_EQ(call(full, tf.hidden.data(), next, true, false), Rows(n, n));
  const std::vector<float> full_streams = full.out.streams_host();
  ASSERT_EQ(full_streams.size(), size_t(n * W));

  Run last{mtp.new_sequence(), {}};  // the last row's logits (a first draft): one row past the caches
  EXPECT_EQ(call(last, tf.hidden.data(), next, false, false), Rows(n, 1));
  ASSERT_EQ(last.out.logits.size(), size_t(V));
  EXPECT_TRUE(test::same_bits(last.out.logits_row(0), full.out.logits_row(0, n - 1), size_t(V)));
  const std::vector<float> last_streams = last.out.streams_host();
  ASSERT_EQ(last_streams.size(), size_t(W));
  EXPECT_TRUE(test::same_bits(last_streams.data(), full_streams.data() + (n - 1) * W, size_t(W)));

  Run split{mtp.new_sequence(), {}};  // a prompt's rows for the cache only, then the last row
  EXPECT_EQ(call(split, tf.hidden.data(), next.first(size_t(n - 1)), false, true), Rows(n - 1, 0));
  EXPECT_TRUE(split.out.logits.empty());
  EXPECT_EQ(call(split, tf.hidden.data() + (n - 1) * W, next.last(1), false, false), Rows(1, 1));
  EXPECT_TRUE(test::same_bits(split.out.logits_row(0), full.out.logits_row(0, n - 1), size_t(V)));

  // The caches hold the same rows: a chained row on each gives the same bits.
  const int32_t chained = all[size_t(n + 1)];
  std::vector<std::vector<float>> logits;
  for (Run* run : {&full, &last, &split}) {
    call(*run, full_streams.data() + (n - 1) * W, std::span<const int32_t>(&chained, 1), false, false);
    logits.push_back(run->out.logits);
  }
  EXPECT_TRUE(test::same_bits(logits[1].data(), logits[0].data(), size_t(V)));
  EXPECT_TRUE(test::same_bits(logits[2].data(), logits[0].data(), size_t(V)));
}

}  // namespace
}  // namespace dsv4
