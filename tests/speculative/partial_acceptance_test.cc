// Speculative decoding where most steps accept some drafts and roll the rest back — the
// path real models take on every step — on the `mirror` preset.
//
// 1. Greedy speculative == plain greedy, token for token, for k = 1, 2, 3, 4, 8, over
//    generations that cross the sliding window (32) a dozen times and three ratio-128
//    compression blocks (and ~100 ratio-4 blocks), batches and single sequences.
// 2. Bit-exact rows: every target row computed while verifying equals the row of a plain
//    teacher-forced pass over the tokens it saw — the accepted rows against one pass over
//    the final stream, the rows after a rejected draft against a fresh pass over the
//    prefix with the drafts; every MTP draft's logits, at every depth, equal a fresh MTP
//    chain over the same prefix (target-conditioned rows, then its own streams).
// Each test asserts the counts that prove its path ran (drafts made, accepted, partial steps).
#include <gtest/gtest.h>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::vector<std::vector<int32_t>> long_prompts(int64_t V) {
  return {test::random_prompt(5, V, 1), test::random_prompt(23, V, 2), test::random_prompt(41, V, 3)};
}

TEST(PartialAcceptance, GreedySpeculativeEqualsPlainOverLongGenerations) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const ModelConfig& c = engine->config();
  const auto prompts = long_prompts(c.vocab_size);
  GenerateOptions o;
  o.max_new_tokens = 420;
  const auto plain = test::generate(*engine, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(plain[i].tokens.size(), 420u);
    ASSERT_GE(int64_t(prompts[i].size()) + 420, 3 * 128 + 1) << "fewer than three ratio-128 blocks";
  }
  ASSERT_EQ(c.sliding_window, 32);

  for (int k : {1, 2, 3, 4, 8}) {
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto batch = test::generate(*engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(batch[i].tokens, plain[i].tokens) << "batch of 3, sequence " << i << ", k = " << k;
    std::printf("k=%d: %lld steps, drafted %lld, accepted %lld, full/partial/rejected %lld/%lld/%lld\n", k,
                (long long)m.sequence_steps, (long long)m.drafted, (long long)m.accepted, (long long)m.full_steps,
                (long long)m.partial_steps, (long long)m.rejected_steps);
    // Only a sequence's last steps (at most k of them) may draft fewer than k: the length limit.
    ASSERT_EQ(m.drafted_at.size(), size_t(k));
    EXPECT_GE(m.drafted_at[size_t(k - 1)], m.sequence_steps - 3 * k) << "k = " << k;
    EXPECT_GT(m.rejected_steps, 10) << "k = " << k;
    EXPECT_GT(m.full_steps, 10) << "k = " << k;
    if (k > 1) { EXPECT_GT(m.partial_steps, std::max<int64_t>(30, m.sequence_steps / 8)) << "k = " << k; }
  }
  for (int k : {2, 4}) {
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto single = test::generate(*engine, {prompts[1]}, o, &m);
    EXPECT_EQ(single[0].tokens, plain[1].tokens) << "single sequence, k = " << k;
    EXPECT_GT(m.partial_steps, 10);
  }
}

// --draft auto with the MTP (the default wherever a checkpoint has a drafter), with given costs
// (a pass of 10 ms + 0.2 ms a row, a draft depth of 0.5 ms, frozen: the choice then depends on the
// acceptance alone): it drafts, verifies lengths that vary with what each sequence has been
// accepting, and the greedy output is plain decoding's over 420 tokens.
TEST(PartialAcceptance, AutoChoosesVerifyLengthsAndKeepsTheGreedyOutput) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const auto prompts = long_prompts(engine->config().vocab_size);
  GenerateOptions o;
  o.max_new_tokens = 420;
  const auto plain = test::generate(*engine, prompts, o);
  auto scheduler = std::make_unique<VerifyScheduler>(VerifyScheduler::Options{4, DraftProposer::Cost::PerDraft, 8});
  for (int64_t rows = 1; rows <= 15; ++rows) scheduler->record_pass(rows, 0.010 + 0.0002 * double(rows - 1));
  for (int64_t n = 1; n <= 3; ++n) scheduler->record_draft(n, 1, 0.0005);
  scheduler->freeze_costs();
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  decoder.set_scheduler(std::move(scheduler));
  o.draft_tokens = 4;
  o.draft_auto = true;
  const auto spec = decoder.generate(prompts, o);
  const DecodeMetrics& m = decoder.metrics();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "sequence " << i;
  std::printf("auto: %lld steps, verified by k:", (long long)m.sequence_steps);
  for (int64_t n : m.verified_steps) std::printf(" %lld", (long long)n);
  std::printf(", accepted %lld of %lld\n", (long long)m.accepted, (long long)m.drafted);
  EXPECT_GT(m.drafted, m.sequence_steps / 2) << "auto rarely drafted where drafting pays";
  EXPECT_GT(m.partial_steps, 10);
  int lengths = 0;
  for (size_t k = 1; k < m.verified_steps.size(); ++k) lengths += m.verified_steps[k] > 0;
  EXPECT_GE(lengths, 2) << "auto verified a single length";
  EXPECT_GT(decoder.scheduler()->expectation().gain(), 1.0);
}

TEST(PartialAcceptance, VerificationAndDraftLogitsAreBitExact) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(9, V, 21), test::random_prompt(30, V, 22)};
  for (int k : {3, 5}) {
    GenerateOptions o;
    o.max_new_tokens = 400;
    o.draft_tokens = k;
    o.record_steps = true;
    DecodeMetrics m;
    const auto out = test::generate(*engine, prompts, o, &m);
    ASSERT_GT(m.partial_steps, 20) << "k = " << k;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<int32_t> all = test::concat(prompts[i], out[i].tokens);
      const test::TeacherForced tf = test::teacher_forced(*engine, all);
      int64_t accepted_rows = 0, rejected_rows = 0, draft_rows = 0, chains = 0;
      const auto& steps = out[i].steps;
      ASSERT_GT(steps.size(), 50u);
      for (size_t s = 0; s < steps.size(); ++s) {
        const StepRecord& st = steps[s];
        const int n = int(st.drafts.size());
        ASSERT_EQ(st.target_logits.size(), size_t(n + 1) * size_t(V));
        // Rows 0..a saw only tokens of the final stream.
        for (int r = 0; r <= st.accepted; ++r, ++accepted_rows)
          ASSERT_TRUE(test::same_bits(st.target_logits.data() + r * V, tf.logits_row(0, st.position + r), size_t(V)))
              << "k = " << k << ", sequence " << i << ", step " << s << ": verification row " << r
              << " differs from the teacher-forced row at position " << st.position + r;
        // Rows after the first rejected draft, and the draft chains, on every step.
        if (n == 0) continue;
        if (st.accepted < n) {
          std::vector<int32_t> seen(all.begin(), all.begin() + st.position + 1);
          seen.insert(seen.end(), st.drafts.begin(), st.drafts.end());
          const test::TeacherForced fresh = test::teacher_forced(*engine, seen);
          for (int r = st.accepted + 1; r <= n; ++r, ++rejected_rows)
            ASSERT_TRUE(test::same_bits(st.target_logits.data() + r * V, fresh.logits_row(0, st.position + r),
                                        size_t(V)))
                << "k = " << k << ", step " << s << ": verification row " << r << " (after a rejected draft) differs";
        }
        const auto chain = test::mtp_chain(*engine, tf.hidden, all, st.position, st.drafts);
        ASSERT_EQ(st.draft_logits.size(), size_t(n) * size_t(V));
        for (int d = 0; d < n; ++d, ++draft_rows)
          ASSERT_TRUE(test::same_bits(st.draft_logits.data() + d * V, chain[size_t(d)].data(), size_t(V)))
              << "k = " << k << ", sequence " << i << ", step " << s << ": draft " << d + 1
              << " logits differ from a fresh MTP chain at position " << st.position - 1 + d;
        ++chains;
      }
      std::printf("k=%d, sequence %zu: %lld accepted-path rows, %lld rows after rejections, %lld draft rows "
                  "(%lld chains) bit-exact\n", k, i, (long long)accepted_rows, (long long)rejected_rows,
                  (long long)draft_rows, (long long)chains);
      EXPECT_GT(rejected_rows, 10);
      EXPECT_GT(draft_rows, 2 * chains) << "chains of several drafts were checked";
    }
  }
}

}  // namespace
}  // namespace dsv4
