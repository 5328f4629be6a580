// An auto sequence's drafter started at its prompt's last row (where computing the prompt's last
// window for it would cost more than drafting is expected to save over its first W tokens): the
// target's last block computes the streams of that row alone, the sequence decodes plainly until
// its plain steps have given the drafter a whole window, and from there its drafts are the bits a
// drafter that read the prompt's window has at the same positions.
#include <gtest/gtest.h>

#include "speculative/mtp_proposer.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// Frozen costs where drafting pays (cheap verification), and a prompt row of `prompt_row` seconds.
std::unique_ptr<VerifyScheduler> scheduler_with_prompt_row(double prompt_row) {
  auto scheduler = std::make_unique<VerifyScheduler>(VerifyScheduler::Options{3, DraftProposer::Cost::PerDraft, 8});
  for (int64_t rows = 1; rows <= 8; ++rows) scheduler->record_pass(rows, 0.010 + 0.0002 * double(rows - 1));
  scheduler->record_draft(1, 1, 0.0005);
  scheduler->record_prompt_pass(1, prompt_row);
  scheduler->freeze_costs();
  return scheduler;
}

TEST(LateDrafter, StartsAtThePromptsEndAndDraftsExactlyOnceItHoldsAWindow) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  auto* mtp = dynamic_cast<MtpProposer*>(engine->proposer.get());
  ASSERT_NE(mtp, nullptr);
  const int64_t V = engine->config().vocab_size, W = engine->config().sliding_window, P = 200;
  ASSERT_EQ(mtp->window(), W);
  const std::vector<int32_t> prompt = test::random_prompt(P, V, 94);
  GenerateOptions o;
  o.max_new_tokens = W + 60;
  o.draft_tokens = 3;
  o.record_steps = true;
  const auto fixed = test::generate(*engine, {prompt}, o)[0];  // the drafter reads the prompt's window
  o.draft_auto = true;

  struct Run {
    SequenceOutput out;
    int64_t late = 0, prefill_last_block_rows = 0, prefill_mtp_rows = 0, first_draft_at = -1;
  };
  auto run = [&](double prompt_row) {
    SpeculativeDecoder decoder(*engine->target, mtp);
    decoder.set_scheduler(scheduler_with_prompt_row(prompt_row));
    Run r;
    const int64_t block0 = engine->target->last_block_rows(), mtp0 = engine->mtp->counts().rows;
    const auto id = decoder.add(prompt, o);
    decoder.step();  // the prefill
    r.prefill_last_block_rows = engine->target->last_block_rows() - block0;
    r.prefill_mtp_rows = engine->mtp->counts().rows - mtp0;
    while (!decoder.finished(id)) decoder.step();
    r.late = decoder.metrics().late_drafters;
    r.out = decoder.release(id);
    for (const StepRecord& s : r.out.steps)
      if (!s.drafts.empty()) {
        r.first_draft_at = s.position;
        break;
      }
    return r;
  };

  // Prompt rows cheap: the window is computed, the sequence drafts from its first step.
  const Run early = run(1e-7);
  EXPECT_EQ(early.late, 0);
  EXPECT_EQ(early.prefill_last_block_rows, W) << "the prompt's last window through the last block";
  EXPECT_EQ(early.first_draft_at, P);
  EXPECT_EQ(early.out.tokens, fixed.tokens);

  // A prompt row as dear as a second: the window would cost more than 127 tokens of drafting save.
  const Run late = run(1.0);
  EXPECT_EQ(late.late, 1);
  EXPECT_EQ(late.prefill_last_block_rows, 1) << "only the logits row through the last block";
  EXPECT_EQ(late.prefill_mtp_rows, 0);
  EXPECT_EQ(late.first_draft_at, P - 1 + W) << "the first position whose window the drafter holds whole";
  EXPECT_EQ(late.out.tokens, fixed.tokens);
  const int compared = test::compare_first_drafts(late.out, fixed);
  EXPECT_GT(compared, 10) << "too few positions both runs drafted at";
}

// A kept sequence whose late drafter never drafted (a reply shorter than W) keeps it: a
// continuation drafts once the window since the first prompt's last row is whole, and its tokens
// are plain decoding's.
TEST(LateDrafter, AContinuationKeepsTheLateDrafter) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  auto* mtp = dynamic_cast<MtpProposer*>(engine->proposer.get());
  const int64_t V = engine->config().vocab_size, W = engine->config().sliding_window;
  const std::vector<int32_t> prompt = test::random_prompt(150, V, 95), more = test::random_prompt(20, V, 96);
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.draft_tokens = 3;
  o.draft_auto = true;
  o.keep_state = true;
  o.record_steps = true;
  SpeculativeDecoder decoder(*engine->target, mtp);
  decoder.set_scheduler(scheduler_with_prompt_row(1.0));
  const auto id = decoder.add(prompt, o);
  while (!decoder.finished(id)) decoder.step();
  EXPECT_EQ(decoder.metrics().late_drafters, 1);
  EXPECT_EQ(decoder.output(id).drafted, 0) << "30 tokens: the window never became whole";
  const int64_t continued_at = decoder.length(id) + int64_t(more.size());  // (its prefill yields a token)
  ASSERT_GE(continued_at, int64_t(prompt.size()) - 1 + W) << "(the continuation's first step drafts)";
  GenerateOptions next = o;
  next.max_new_tokens = W + 40;
  decoder.extend(id, more, next);
  while (!decoder.finished(id)) decoder.step();
  const SequenceOutput& out = decoder.output(id);
  ASSERT_FALSE(out.steps.empty());
  EXPECT_EQ(out.steps[0].position, continued_at);
  EXPECT_FALSE(out.steps[0].drafts.empty()) << "its drafter holds a whole window: it drafts at once";

  // Plain decoding of the same two turns.
  GenerateOptions plain = o;
  plain.draft_tokens = 0;
  plain.draft_auto = false;
  SpeculativeDecoder reference(*engine->target, mtp);
  const auto rid = reference.add(prompt, plain);
  while (!reference.finished(rid)) reference.step();
  GenerateOptions plain_next = plain;
  plain_next.max_new_tokens = next.max_new_tokens;
  reference.extend(rid, more, plain_next);
  while (!reference.finished(rid)) reference.step();
  EXPECT_EQ(out.tokens, reference.output(rid).tokens);
}

}  // namespace
}  // namespace dsv4
