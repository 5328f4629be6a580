// Chunked prefill: a prompt processed a chunk per step (each chunk attending to the cache
// the previous ones wrote, the compressors' pending rows and the indexer carried across
// chunk borders, the MTP's rows computed as they come) gives bit-identical results to one
// pass, for chunk sizes that are not multiples of 4 or 128 and that split compression blocks:
// the same tokens, and the same bits in every verification row and every draft's logits. A
// prompt's drafter rows before its last window are skipped, with the same bits again.
#include <gtest/gtest.h>

#include "speculative/mtp_proposer.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

TEST(ChunkedPrefill, AnyChunkSizeGivesTheSameBits) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  // 300 tokens: two full ratio-128 blocks and a partial one, 75 ratio-4 blocks, ~9 windows;
  // more than the MTP proposer queues (its rows are then computed chunk by chunk).
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(300, V, 81), test::random_prompt(37, V, 82)};
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.draft_tokens = 3;
  o.record_steps = true;
  auto run = [&](int64_t chunk, DecodeMetrics* m) {
    SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
    decoder.set_prefill_chunk(chunk);
    auto out = decoder.generate(prompts, o);
    if (m) *m = decoder.metrics();
    return out;
  };
  DecodeMetrics whole_metrics;
  const auto whole = run(1 << 20, &whole_metrics);
  ASSERT_GT(whole_metrics.partial_steps + whole_metrics.full_steps, 10);
  for (int64_t chunk : {1, 7, 64, 127, 129, 256}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const auto chunked = run(chunk, nullptr);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(chunked[i].tokens, whole[i].tokens) << "sequence " << i;
      ASSERT_EQ(chunked[i].steps.size(), whole[i].steps.size());
      for (size_t s = 0; s < whole[i].steps.size(); ++s) {
        const StepRecord &a = chunked[i].steps[s], &b = whole[i].steps[s];
        ASSERT_EQ(a.drafts, b.drafts) << "step " << s;
        ASSERT_TRUE(a.target_logits == b.target_logits) << "sequence " << i << ", step " << s << ": verification rows";
        ASSERT_TRUE(a.draft_logits == b.draft_logits) << "sequence " << i << ", step " << s << ": draft logits";
      }
    }
  }
  // The chunks are real: a prompt of 300 tokens in chunks of 7 takes 43 prefill steps.
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  decoder.set_prefill_chunk(7);
  const auto id = decoder.add(prompts[0], o);
  int steps = 0;
  while (decoder.output(id).tokens.empty()) {
    decoder.step();
    ++steps;
  }
  EXPECT_EQ(steps, 43);
  EXPECT_THROW(decoder.set_prefill_chunk(0), Error);
}

// The MTP layer attends to its last W rows, so a prompt's rows before its last window are never
// read: they are not computed (nor their streams by the target's last block), and every draft,
// draft logit and verification row is the same bits as with the whole prompt through the MTP.
TEST(ChunkedPrefill, TheDrafterComputesOnlyAPromptsLastWindow) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  auto* mtp = dynamic_cast<MtpProposer*>(engine->proposer.get());
  ASSERT_NE(mtp, nullptr);
  const int64_t V = engine->config().vocab_size, W = engine->config().sliding_window;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(300, V, 91), test::random_prompt(W - 3, V, 92)};
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.draft_tokens = 3;
  o.record_steps = true;
  auto run = [&](bool whole, int64_t chunk, int64_t& skipped, int64_t& mtp_rows) {
    mtp->compute_whole_prompts(whole);
    const int64_t skipped0 = mtp->skipped_rows(), rows0 = engine->mtp->counts().rows;
    SpeculativeDecoder decoder(*engine->target, mtp);
    decoder.set_prefill_chunk(chunk);
    auto out = decoder.generate(prompts, o);
    skipped = mtp->skipped_rows() - skipped0;
    mtp_rows = engine->mtp->counts().rows - rows0;
    return out;
  };
  int64_t skipped_whole, rows_whole;
  const auto whole = run(true, 1 << 20, skipped_whole, rows_whole);
  EXPECT_EQ(skipped_whole, 0);
  for (int64_t chunk : {int64_t(1) << 20, int64_t(100)}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    int64_t skipped, rows;
    const auto window = run(false, chunk, skipped, rows);
    EXPECT_EQ(skipped, 300 - W) << "the long prompt's rows before its last window; none of the short one's";
    EXPECT_EQ(rows, rows_whole - skipped);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(window[i].tokens, whole[i].tokens) << "sequence " << i;
      ASSERT_EQ(window[i].steps.size(), whole[i].steps.size());
      for (size_t s = 0; s < whole[i].steps.size(); ++s) {
        const StepRecord &a = window[i].steps[s], &b = whole[i].steps[s];
        ASSERT_EQ(a.drafts, b.drafts) << "sequence " << i << ", step " << s;
        ASSERT_TRUE(a.draft_logits == b.draft_logits) << "sequence " << i << ", step " << s << ": draft logits";
        ASSERT_TRUE(a.target_logits == b.target_logits) << "sequence " << i << ", step " << s << ": verification rows";
      }
    }
  }
  mtp->compute_whole_prompts(false);
}

// A `--draft auto` sequence may never draft: its drafter rows wait for its first draft (none in
// the prefill), and its plain steps keep no more than a window of them queued. Where it never
// drafts the MTP computes nothing; where it drafts, the first draft's logits are the bits a
// fixed-K run has at that position.
TEST(ChunkedPrefill, AnAutoSequencesDrafterRowsWaitForItsFirstDraft) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  auto* mtp = dynamic_cast<MtpProposer*>(engine->proposer.get());
  ASSERT_NE(mtp, nullptr);
  const int64_t V = engine->config().vocab_size, W = engine->config().sliding_window, P = 200;
  const std::vector<int32_t> prompt = test::random_prompt(P, V, 93);
  GenerateOptions o;
  o.max_new_tokens = 160;
  o.draft_tokens = 3;
  o.record_steps = true;
  const auto fixed = test::generate(*engine, {prompt}, o)[0];
  o.draft_auto = true;
  // Frozen costs: a pass of `base` + `per_row` a row, a draft depth of `draft` (seconds).
  auto run = [&](double base, double per_row, double draft, int64_t& mtp_rows, int64_t& skipped, int64_t& drafted) {
    auto scheduler = std::make_unique<VerifyScheduler>(VerifyScheduler::Options{3, DraftProposer::Cost::PerDraft, 8});
    for (int64_t rows = 1; rows <= 8; ++rows) scheduler->record_pass(rows, base + per_row * double(rows - 1));
    scheduler->record_draft(1, 1, draft);
    scheduler->freeze_costs();
    SpeculativeDecoder decoder(*engine->target, mtp);
    decoder.set_scheduler(std::move(scheduler));
    const int64_t rows0 = engine->mtp->counts().rows, skipped0 = mtp->skipped_rows();
    const auto id = decoder.add(prompt, o);
    decoder.step();  // the prefill
    EXPECT_EQ(engine->mtp->counts().rows - rows0, 0) << "the drafter's prompt rows wait for a draft";
    while (!decoder.finished(id)) decoder.step();
    mtp_rows = engine->mtp->counts().rows - rows0;
    skipped = mtp->skipped_rows() - skipped0;
    drafted = decoder.metrics().drafted;
    return decoder.release(id);
  };
  int64_t rows, skipped, drafted;
  // Every row as dear as a token: drafting cannot pay even if accepted, so no probe either.
  const SequenceOutput plain = run(0.010, 0.010, 0.005, rows, skipped, drafted);
  EXPECT_EQ(plain.tokens, fixed.tokens);
  EXPECT_EQ(drafted, 0);
  EXPECT_EQ(rows, 0) << "a sequence that never drafts costs the MTP nothing";
  EXPECT_GE(skipped, P - W + 150) << "all but the last window of its rows skipped";
  // Cheap verification: it drafts.
  const SequenceOutput drafting = run(0.010, 0.0002, 0.0005, rows, skipped, drafted);
  EXPECT_EQ(drafting.tokens, fixed.tokens);
  EXPECT_GT(drafted, 0);
  const int compared = test::compare_first_drafts(drafting, fixed);
  EXPECT_GT(compared, 10) << "too few positions both runs drafted at";
}

}  // namespace
}  // namespace dsv4
