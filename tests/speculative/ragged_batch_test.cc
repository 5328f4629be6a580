// Ragged batches through the step-wise decoder, on the partial-acceptance (mirror) preset:
// sequences in one verification pass with different prompt lengths, draft lengths and
// numbers of accepted drafts; one stopping at an EOS that falls inside its accepted drafts,
// one at its length limit, one plain; one added while the others are mid-generation and
// one cancelled. Every sequence must produce exactly what it produces alone with plain
// greedy decoding, and every cache block must be back in the pools at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::vector<int32_t> plain_alone(Engine& engine, const std::vector<int32_t>& prompt, GenerateOptions o) {
  o.draft_tokens = 0;
  o.record_steps = false;
  return test::generate(engine, {prompt}, o)[0].tokens;
}

// An EOS token for which a speculative run of `prompt` stops inside a step's accepted
// drafts: the first accepted draft of a step that accepted >= 2, not emitted earlier.
int32_t eos_inside_accepted_drafts(Engine& engine, const std::vector<int32_t>& prompt, GenerateOptions o) {
  o.record_steps = true;
  const auto out = test::generate(engine, {prompt}, o)[0];
  std::set<int32_t> seen(out.tokens.begin(), out.tokens.begin() + 1);  // the prefill's token
  size_t emitted = 1;
  for (const StepRecord& s : out.steps) {
    if (s.accepted >= 2 && !seen.count(s.drafts[0]) && emitted > 40) return s.drafts[0];
    for (int j = 0; j <= s.accepted && emitted < out.tokens.size(); ++j) seen.insert(out.tokens[emitted++]);
  }
  ADD_FAILURE() << "no step accepted two drafts after a fresh token";
  return -1;
}

TEST(RaggedBatch, EverySequenceDecodesAsItWouldAlone) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  struct Spec {
    const char* what;
    std::vector<int32_t> prompt;
    GenerateOptions o;
    int64_t add_at_step = 0;   // step() calls before it is added
    int64_t cancel_at_step = -1;
  };
  auto options = [](int k, int64_t max_new) {
    GenerateOptions o;
    o.draft_tokens = k;
    o.max_new_tokens = max_new;
    o.record_steps = true;
    return o;
  };
  std::vector<Spec> specs = {
      {"k=3, prompt 7", test::random_prompt(7, V, 61), options(3, 300)},
      {"k=1, prompt 50", test::random_prompt(50, V, 62), options(1, 200)},
      {"k=8, prompt 19, EOS inside accepted drafts", test::random_prompt(19, V, 63), options(8, 260)},
      {"plain, prompt 3", test::random_prompt(3, V, 64), options(0, 150)},
      {"k=4, prompt 30, length limit 37", test::random_prompt(30, V, 65), options(4, 37)},
      {"k=2, added at step 15", test::random_prompt(12, V, 66), options(2, 180), 15},
      {"k=3, cancelled at step 10", test::random_prompt(25, V, 67), options(3, 300), 0, 10},
  };
  specs[2].o.eos = eos_inside_accepted_drafts(*engine, specs[2].prompt, specs[2].o);

  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  std::vector<SpeculativeDecoder::SequenceId> ids(specs.size(), ~0ull);
  int64_t ragged_steps = 0, mixed_k_steps = 0;
  std::vector<size_t> steps_seen(specs.size(), 0);
  int64_t blocks_before_cancel = -1, blocks_after_cancel = -1;
  for (int64_t step = 0; step < 2000; ++step) {
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].add_at_step == step) ids[i] = decoder.add(specs[i].prompt, specs[i].o);
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].cancel_at_step == step) {
        blocks_before_cancel = engine->target->pools().blocks_in_use();
        decoder.cancel(ids[i]);
        blocks_after_cancel = engine->target->pools().blocks_in_use();
      }
    if (decoder.idle() && step > 15) break;
    decoder.step();
    // This step's outcome per sequence that verified drafts in it.
    std::set<int> accepted, drafted;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (ids[i] == ~0ull) continue;
      const auto& steps = decoder.output(ids[i]).steps;
      if (steps.size() == steps_seen[i]) continue;
      steps_seen[i] = steps.size();
      accepted.insert(steps.back().accepted);
      drafted.insert(int(steps.back().drafts.size()));
    }
    ragged_steps += accepted.size() >= 3;
    mixed_k_steps += drafted.size() >= 3;
  }
  ASSERT_TRUE(decoder.idle());
  std::printf("steps with >= 3 different accepted counts: %lld; with >= 3 different draft lengths: %lld\n",
              (long long)ragged_steps, (long long)mixed_k_steps);
  EXPECT_GT(ragged_steps, 5);
  EXPECT_GT(mixed_k_steps, 20);
  EXPECT_LT(blocks_after_cancel, blocks_before_cancel) << "cancel released no cache blocks";

  for (size_t i = 0; i < specs.size(); ++i) {
    const SequenceOutput out = decoder.release(ids[i]);
    const Spec& s = specs[i];
    if (s.cancel_at_step >= 0) {
      EXPECT_EQ(out.finish, FinishReason::Cancelled) << s.what;
      const auto alone = plain_alone(*engine, s.prompt, s.o);
      ASSERT_LT(out.tokens.size(), alone.size()) << s.what;
      EXPECT_TRUE(std::equal(out.tokens.begin(), out.tokens.end(), alone.begin())) << s.what << ": prefix differs";
      continue;
    }
    EXPECT_EQ(out.tokens, plain_alone(*engine, s.prompt, s.o)) << s.what;
    int64_t partial = 0;
    for (const StepRecord& r : out.steps) partial += r.accepted > 0 && r.accepted < int(r.drafts.size());
    if (s.o.draft_tokens >= 2) { EXPECT_GT(partial, 0) << s.what << ": no partial step"; }
  }
  // EOS inside the accepted drafts: the last step accepted drafts past the EOS (cut off).
  {
    const auto& c = specs[2];
    SpeculativeDecoder alone(*engine->target, engine->proposer.get());
    const auto out = alone.generate(std::vector<std::vector<int32_t>>{c.prompt}, c.o)[0];
    ASSERT_TRUE(out.stopped_at_eos);
    EXPECT_EQ(out.finish, FinishReason::Eos);
    const StepRecord& last = out.steps.back();
    const long at = std::find(last.drafts.begin(), last.drafts.end(), *c.o.eos) - last.drafts.begin();
    EXPECT_LT(at + 1, last.accepted) << "the EOS must be an accepted draft followed by more accepted drafts";
  }
  // The length limit: the last step drafted only what could still be emitted.
  {
    const auto& e = specs[4];
    SpeculativeDecoder alone(*engine->target, engine->proposer.get());
    const auto out = alone.generate(std::vector<std::vector<int32_t>>{e.prompt}, e.o)[0];
    ASSERT_EQ(out.tokens.size(), 37u);
    EXPECT_EQ(out.finish, FinishReason::Length);
  }
  EXPECT_EQ(engine->target->pools().blocks_in_use(), 0) << "target cache blocks leaked";
  EXPECT_EQ(engine->mtp->pools().blocks_in_use(), 0) << "MTP cache blocks leaked";
}

TEST(RaggedBatch, BadSequencesAreRefusedWithoutDisturbingOthers) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const ModelConfig& c = engine->config();
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  GenerateOptions o;
  o.draft_tokens = 3;
  o.max_new_tokens = 60;
  const auto prompt = test::random_prompt(10, c.vocab_size, 70);
  const auto id = decoder.add(prompt, o);
  for (int i = 0; i < 5; ++i) decoder.step();
  auto refused = [&](std::vector<int32_t> p, const GenerateOptions& bad, const std::string& message) {
    try {
      decoder.add(std::move(p), bad);
      ADD_FAILURE() << "accepted a sequence that should be refused (" << message << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused({}, o, "empty");
  refused({0, 5, int32_t(c.vocab_size)}, o, "prompt token 2 is " + std::to_string(c.vocab_size));
  refused({0, -3}, o, "prompt token 1 is -3");
  refused(std::vector<int32_t>(size_t(c.max_position_embeddings), 1), o, "context limit");
  GenerateOptions long_draft = o;
  long_draft.draft_tokens = 16;
  refused(prompt, long_draft, "draft length 16");
  while (!decoder.idle()) decoder.step();
  EXPECT_EQ(decoder.release(id).tokens, plain_alone(*engine, prompt, o));
}

}  // namespace
}  // namespace dsv4
