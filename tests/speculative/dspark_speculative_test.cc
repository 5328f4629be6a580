// Speculative decoding with the DSpark drafter (DeepSeek-V4-Flash-0731) on the partial-acceptance
// `mirror-dspark` preset: the guarantees and the kinds of tests of the MTP path.
//
// 1. Greedy speculative == plain greedy, token for token, for K = 1..5 and auto, over 420 tokens
//    that cross the sliding window (32, the rings' size) a dozen times; batches mixing every K,
//    auto and sequences that do not draft, one joining mid-way.
// 2. Bit-exact rows: every verification row equals a plain teacher-forced pass; every draft's
//    corrected logits equal a fresh drafter over the same prefix (rings written from one pass over
//    it): the rings hold exactly the verified positions, whatever was rejected before.
// 3. Sampling keeps the target's distribution: the joint distribution of the first four sampled
//    tokens (depths 1-3 of the first block) against the exact one; its power: a wrong q at depth
//    >= 2 is caught.
// 4. Long prompts in chunks: the rings skip what no draft reads, the same bits for any chunk size.
// 5. Grammar masks: every draft inside the grammar, greedy unchanged, rollbacks through the matcher.
// Each test asserts the counts that prove its path ran.
#include <gtest/gtest.h>

#include "grammar/grammar_mask.h"
#include "support/joint_distribution.h"
#include "support/spec_support.h"
#include "support/synthetic_vocabulary.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

Engine& dspark_engine() {
  static std::unique_ptr<Engine> engine = [] {
    auto e = Engine::open(test::mirror_dspark_checkpoint(), {test::test_backend(), true, 0, 16});
    EXPECT_TRUE(e->dspark) << "mirror-dspark loaded without its drafter";
    return e;
  }();
  return *engine;
}

std::vector<std::vector<int32_t>> dspark_long_prompts(int64_t V) {
  return {test::random_prompt(5, V, 1), test::random_prompt(23, V, 2), test::random_prompt(41, V, 3)};
}

void print_dspark(const char* label, const DecodeMetrics& m) {
  std::printf("%s: %lld steps, drafted %lld, accepted %lld, full/partial/rejected %lld/%lld/%lld, by position:", label,
              (long long)m.sequence_steps, (long long)m.drafted, (long long)m.accepted, (long long)m.full_steps,
              (long long)m.partial_steps, (long long)m.rejected_steps);
  for (double a : m.acceptance_by_position()) std::printf(" %.3f", a);
  std::printf("\n");
}

TEST(DSparkSpeculation, GreedyEqualsPlainForEveryDraftLengthAndAuto) {
  Engine& engine = dspark_engine();
  const ModelConfig& c = engine.config();
  ASSERT_EQ(c.sliding_window, 32);
  const auto prompts = dspark_long_prompts(c.vocab_size);
  GenerateOptions o;
  o.max_new_tokens = 420;
  const auto plain = test::generate(engine, prompts, o);
  for (const auto& p : plain) ASSERT_EQ(p.tokens.size(), 420u);
  for (int k = 1; k <= 5; ++k) {
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto spec = test::generate(engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "sequence " << i << ", K = " << k;
    print_dspark(("K=" + std::to_string(k)).c_str(), m);
    EXPECT_GT(m.accepted, m.sequence_steps / 2) << "drafts are rarely accepted: the preset's construction broke";
    EXPECT_GT(m.rejected_steps, 10);
    ASSERT_EQ(m.drafted_at.size(), size_t(k));
    EXPECT_GE(m.drafted_at[size_t(k - 1)], m.sequence_steps - 3 * k) << "K = " << k;
    EXPECT_GT(m.full_steps, 10) << "K = " << k;
    if (k > 1) {
      EXPECT_GT(m.partial_steps, 20) << "K = " << k;
    }
  }
  // auto, with this machine's measured costs: whatever it chooses, the same tokens.
  o.draft_tokens = 5;
  o.draft_auto = true;
  const auto measured = test::generate(engine, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(measured[i].tokens, plain[i].tokens) << "auto, sequence " << i;
}

// auto with given costs (a pass of 10 ms + 0.5 ms a row, a block draft of 1 ms a sequence, frozen): the
// choice then depends on the drafts' confidence and the sequence's acceptance alone (the rule itself
// is checked against an exhaustive search in verify_scheduler_test.cc); lossless whatever it verifies.
TEST(DSparkSpeculation, AutoVerifiesThePrefixItsConfidenceAndCostsChoose) {
  Engine& engine = dspark_engine();
  const auto prompts = dspark_long_prompts(engine.config().vocab_size);
  GenerateOptions o;
  o.max_new_tokens = 300;
  const auto plain = test::generate(engine, prompts, o);
  auto scheduler = [] {
    auto s = std::make_unique<VerifyScheduler>(VerifyScheduler::Options{5, DraftProposer::Cost::Once, 8});
    for (int64_t rows = 1; rows <= 18; ++rows) s->record_pass(rows, 0.010 + 0.0005 * double(rows - 1));
    for (int64_t n = 1; n <= 3; ++n) s->record_draft(n, 1, 0.001 * double(n));
    s->freeze_costs();
    return s;
  };
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  decoder.set_scheduler(scheduler());
  o.draft_tokens = 5;
  o.draft_auto = true;
  const auto spec = decoder.generate(prompts, o);
  const DecodeMetrics& m = decoder.metrics();
  print_dspark("auto, given costs", m);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "sequence " << i;
  // Drafting paid at these costs, and the block was cut to different lengths by its confidence.
  ASSERT_GE(m.drafted_at.size(), 2u);
  int lengths = 0;
  for (size_t j = 0; j < m.drafted_at.size(); ++j)
    lengths += m.drafted_at[j] > (j + 1 < m.drafted_at.size() ? m.drafted_at[j + 1] : 0);
  EXPECT_GE(lengths, 2) << "auto verified a single length";
  EXPECT_GT(m.drafted_at[0], m.sequence_steps / 2) << "auto rarely drafted where drafting pays";
  EXPECT_GT(m.accepted, m.sequence_steps / 3);
}

TEST(DSparkSpeculation, BatchesMixDraftLengthsAutoAndPlainSequences) {
  Engine& engine = dspark_engine();
  const int64_t V = engine.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (uint64_t i = 0; i < 7; ++i) prompts.push_back(test::random_prompt(4 + int64_t(i) * 5, V, 100 + i));
  GenerateOptions plain_options;
  plain_options.max_new_tokens = 200;
  const auto plain = test::generate(engine, prompts, plain_options);
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  std::vector<SpeculativeDecoder::SequenceId> ids;
  auto add = [&](size_t i) {
    GenerateOptions o = plain_options;
    o.draft_tokens = i < 5 ? int(i) + 1 : i == 5 ? 5 : 0;  // K = 1..5, auto (up to 5), no drafts
    o.draft_auto = i == 5;
    ids.push_back(decoder.add(prompts[i], o));
  };
  for (size_t i = 0; i + 1 < prompts.size(); ++i) add(i);
  for (int step = 0; !decoder.idle(); ++step) {
    if (step == 9) add(prompts.size() - 1);  // a plain sequence joins running drafters mid-way
    decoder.step();
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(decoder.output(ids[i]).tokens, plain[i].tokens) << "sequence " << i;
  const DecodeMetrics& m = decoder.metrics();
  print_dspark("mixed batch", m);
  EXPECT_GT(m.partial_steps, 20);
  EXPECT_EQ(m.drafted_at.size(), 5u);
}

TEST(DSparkSpeculation, VerificationRowsAndDraftLogitsAreBitExact) {
  Engine& engine = dspark_engine();
  const int64_t V = engine.config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(9, V, 21), test::random_prompt(44, V, 22)};
  GenerateOptions o;
  o.max_new_tokens = 160;
  o.draft_tokens = 5;
  o.record_steps = true;
  DecodeMetrics m;
  const auto out = test::generate(engine, prompts, o, &m);
  ASSERT_GT(m.partial_steps, 10);
  int64_t rows = 0, drafts = 0, after_rejection = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> all = test::concat(prompts[i], out[i].tokens);
    const test::TeacherForced tf = test::teacher_forced(engine, all);
    const int64_t P = int64_t(prompts[i].size());
    bool rejected_before = false;
    for (const StepRecord& st : out[i].steps) {
      const int64_t L = st.position;  // the verified rows' first position: the last token's
      // Accepted rows and the target's own token: the rows of one pass over the final stream.
      for (int j = 0; j <= st.accepted; ++j, ++rows)
        ASSERT_TRUE(test::same_bits(st.target_logits.data() + j * V, tf.logits_row(0, L + j), size_t(V)))
            << "sequence " << i << ", position " << L + j;
      if (st.drafts.empty()) continue;  // (a sequence's last steps may not draft)
      // Every draft: a fresh drafter over the prefix, the drafts before it as its Markov inputs.
      const auto fresh = test::dspark_fresh_draft(engine, all, P, L, st.drafts);
      for (size_t j = 0; j < st.drafts.size(); ++j, ++drafts)
        ASSERT_TRUE(test::same_bits(st.draft_logits.data() + j * size_t(V), fresh[j].data(), size_t(V)))
            << "sequence " << i << ", draft " << j + 1 << " after position " << L;
      after_rejection += rejected_before;
      rejected_before = st.accepted < int(st.drafts.size());
    }
  }
  std::printf("bit-exact: %lld verification rows, %lld drafts (%lld steps right after a rejection)\n", (long long)rows,
              (long long)drafts, (long long)after_rejection);
  EXPECT_GT(drafts, 300);
  EXPECT_GT(after_rejection, 20);
}

// The power check: a proposer that reports q without the request's top-k cut (accepting drafts too
// often) is caught on half the sequences.
TEST(DSparkSampling, JointDistributionThroughDraftDepthThreeIsTheTargets) {
  Engine& engine = dspark_engine();
  // (prompt seed 128: drafts accepted at every depth at this temperature)
  const std::vector<int32_t> prompt = test::random_prompt(4, engine.config().vocab_size, 128);
  const SamplingParams sp{2.0f, 3, 1.0f, 1000};
  const auto exact = test::exact_joint(engine, prompt, sp, 4);
  const int64_t n = 6000;
  const test::JointFit f = test::fit_at_depth_three(engine, engine.proposer.get(), prompt, sp, exact, n, "DSpark, K=3");
  EXPECT_GT(f.p, 1e-3);
  EXPECT_GT(f.cells, 20);
  EXPECT_GT(f.m.drafted_at.at(2), n / 2);
  EXPECT_GT(f.m.accepted_at.at(1), n / 8);
  EXPECT_GT(f.m.accepted_at.at(2), n / 16);
  EXPECT_GT(f.m.partial_steps, n / 10);
  test::UncutProbabilities wrong_q(*engine.proposer);
  const test::JointFit wrong = test::fit_at_depth_three(engine, &wrong_q, prompt, sp, exact, n / 2, "DSpark, q without top-k");
  EXPECT_LT(wrong.p, 1e-5) << "the test cannot tell a rejection with the wrong q from the right one";
}

TEST(DSparkSpeculation, LongPromptsInChunksSkipUnreadRingRowsAndKeepTheBits) {
  Engine& engine = dspark_engine();
  const int64_t V = engine.config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(300, V, 81), test::random_prompt(37, V, 82)};
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.draft_tokens = 4;
  o.record_steps = true;
  auto run = [&](int64_t chunk) {
    SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
    decoder.set_prefill_chunk(chunk);
    return decoder.generate(prompts, o);
  };
  const DSparkDrafter::Counts before = engine.dspark->counts();
  const auto whole = run(1 << 20);
  // The 300-token prompt's rings keep its last 32 positions: 268 rows skipped, none computed.
  EXPECT_EQ(engine.dspark->counts().skipped_context_rows - before.skipped_context_rows, 300 - 32 + 37 - 32);
  for (int64_t chunk : {1, 7, 31, 33, 128}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    const auto chunked = run(chunk);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(chunked[i].tokens, whole[i].tokens) << "sequence " << i;
      ASSERT_EQ(chunked[i].steps.size(), whole[i].steps.size());
      for (size_t s = 0; s < whole[i].steps.size(); ++s) {
        ASSERT_EQ(chunked[i].steps[s].drafts, whole[i].steps[s].drafts) << "step " << s;
        ASSERT_TRUE(chunked[i].steps[s].draft_logits == whole[i].steps[s].draft_logits) << "step " << s;
      }
    }
  }
}

TEST(DSparkSpeculation, GrammarMasksHoldForEveryDraftAndGreedyIsUnchanged) {
  Engine& engine = dspark_engine();
  const int64_t V = engine.config().vocab_size;
  const auto vocab = test::synthetic_vocabulary(V);
  const auto g = std::make_shared<grammar::CompiledGrammar>(
      grammar::parse_gbnf(R"(root ::= "[" ( [a-z0-9 ]{1,6} ( "," [a-z0-9 ]{1,6} ){0,12} )? "]")"), vocab, 2);
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(8, V, 41), test::random_prompt(15, V, 42)};
  GenerateOptions o;
  o.max_new_tokens = 90;
  o.eos = test::kVocabEos;
  grammar::GrammarMask plain_mask(g);
  o.mask = &plain_mask;
  const auto plain = test::generate(engine, prompts, o);
  for (int k : {2, 5}) {
    grammar::GrammarMask mask(g);
    o.mask = &mask;
    o.draft_tokens = k;
    o.record_steps = true;
    DecodeMetrics m;
    const auto spec = test::generate(engine, prompts, o, &m);
    int64_t checked = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "K = " << k << ", sequence " << i;
      for (const StepRecord& st : spec[i].steps) {
        grammar::TokenMatcher matcher(g);
        const size_t before = size_t(st.position) + 1 - prompts[i].size();
        for (size_t j = 0; j < before; ++j) ASSERT_TRUE(matcher.accept(spec[i].tokens[j]));
        for (int32_t d : st.drafts) {
          ASSERT_TRUE(matcher.accept(d)) << "K = " << k << ": a draft outside the grammar at " << st.position;
          ++checked;
        }
      }
    }
    print_dspark(("grammar, K=" + std::to_string(k)).c_str(), m);
    EXPECT_GT(checked, 30);
    EXPECT_GT(mask.counters().tokens_rolled_back, 0) << "no rejected draft reached the matcher";
  }
}

}  // namespace
}  // namespace dsv4
