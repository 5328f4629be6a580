// Structured output with drafts, on the partial-acceptance (mirror) preset with a synthetic
// byte vocabulary (printable ASCII, JSON pieces that span several grammar symbols, and
// random fragments). Each test guards one bug class engines have shipped:
// - drafts proposed outside the grammar, or a matcher out of step after a rollback: every
//   draft is allowed by the grammar state of its own prefix, rollbacks happened (counted), and
//   speculative greedy == plain greedy under the grammar;
// - the reasoning's end inside a draft: the positions after it are constrained at once;
// - a special token drafted where the grammar forbids it: never proposed, never fed;
// - speculation stuck under a grammar that forces an end: every k finishes at EOS;
// - sampled output: every token allowed, every finished output complete.
#include <gtest/gtest.h>

#include <cmath>

#include "grammar/grammar_mask.h"
#include "support/spec_support.h"
#include "support/synthetic_vocabulary.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

using grammar::CompiledGrammar;
using grammar::GrammarMask;
using grammar::TokenMatcher;
using grammar::TokenVocabulary;

constexpr int32_t kEos = test::kVocabEos, kThinkEnd = test::kVocabThinkEnd, kOtherSpecial = test::kVocabOtherSpecial;
using test::synthetic_vocabulary;

// An object with a string, an integer and an array of booleans (bounded whitespace, none
// after the root: the model must stop once the object closes).
const char* kSchemaGrammar = R"(
root  ::= "{" ws "\"a\"" ws ":" ws str ws "," ws "\"b\"" ws ":" ws int ws "," ws "\"c\"" ws ":" ws bools ws "}"
str   ::= "\"" [a-z0-9 .é]{0,12} "\""
int   ::= "-"? ( "0" | [1-9] [0-9]{0,4} )
bools ::= "[" ws ( bool ( ws "," ws bool ){0,3} )? ws "]"
bool  ::= "true" | "false"
ws    ::= ( " " | "\n" " "{0,2} )?
)";

struct Fixture {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<const TokenVocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> grammar;
};

Fixture& fixture() {
  static Fixture s = [] {
    Fixture s;
    s.engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
    s.vocab = synthetic_vocabulary(s.engine->config().vocab_size);
    s.grammar = std::make_shared<CompiledGrammar>(grammar::parse_gbnf(kSchemaGrammar), s.vocab, 2);
    return s;
  }();
  return s;
}

// Every token of `tokens` is allowed in turn; returns the matcher's completeness.
bool replay(const std::shared_ptr<const CompiledGrammar>& g, std::span<const int32_t> tokens, std::string* why) {
  TokenMatcher m(g);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!m.accept(tokens[i])) {
      *why = "token " + std::to_string(tokens[i]) + " at " + std::to_string(i) + " not allowed";
      return false;
    }
  return m.complete() || m.finished();
}

TEST(GrammarDecoding, DraftsFollowTheGrammarRollbacksKeepItInStepAndGreedyIsUnchanged) {
  Fixture& s = fixture();
  const int64_t V = s.engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(8, V, 41), test::random_prompt(15, V, 42),
                                                     test::random_prompt(5, V, 43)};
  GenerateOptions o;
  o.max_new_tokens = 90;
  o.eos = kEos;
  GrammarMask plain_mask(s.grammar);
  o.mask = &plain_mask;
  const auto plain = test::generate(*s.engine, prompts, o);
  int finished = 0;
  for (const auto& out : plain) {
    std::string why;
    const bool complete = replay(s.grammar, out.tokens, &why);
    EXPECT_TRUE(why.empty()) << why;
    if (out.stopped_at_eos) {
      EXPECT_TRUE(complete);
    }
    finished += out.stopped_at_eos;
  }
  EXPECT_GT(finished, 0) << "no output completed the grammar: the test would not see EOS";

  for (int k : {1, 2, 4}) {
    GrammarMask mask(s.grammar);
    o.mask = &mask;
    o.draft_tokens = k;
    o.record_steps = true;
    DecodeMetrics m;
    const auto spec = test::generate(*s.engine, prompts, o, &m);
    int64_t drafts_checked = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "k = " << k << ", sequence " << i;
      // Each draft was allowed by the grammar after the output before it and the drafts before it.
      const size_t P = prompts[i].size();
      for (const StepRecord& st : spec[i].steps) {
        const size_t out_before = size_t(st.position) + 1 - P;  // output tokens before d_1
        TokenMatcher matcher(s.grammar);
        for (size_t j = 0; j < out_before; ++j) ASSERT_TRUE(matcher.accept(spec[i].tokens[j]));
        for (size_t j = 0; j < st.drafts.size(); ++j) {
          EXPECT_NE(st.drafts[j], kOtherSpecial);
          ASSERT_TRUE(matcher.accept(st.drafts[j])) << "k = " << k << ": draft " << j + 1 << " at position "
                                                    << st.position << " is outside the grammar";
          ++drafts_checked;
        }
      }
    }
    std::printf("k=%d under the grammar: drafted %lld, accepted %lld, partial steps %lld, rolled back %lld tokens\n",
                k, (long long)m.drafted, (long long)m.accepted, (long long)m.partial_steps,
                (long long)mask.counters().tokens_rolled_back);
    EXPECT_GT(drafts_checked, 50);
    EXPECT_GT(m.accepted, 0);
    if (k > 1) {  // (with k = 1 a rejected draft is never in a context the mask sees)
      EXPECT_GT(m.partial_steps, 0);
      EXPECT_GT(mask.counters().tokens_rolled_back, 0) << "no rejected draft reached the matcher: rollback untested";
    }
  }
}

TEST(GrammarDecoding, AGrammarThatForcesAnEndFinishesAtEveryDraftLength) {
  Fixture& s = fixture();
  const auto g = std::make_shared<CompiledGrammar>(
      grammar::parse_gbnf(R"(root ::= "{\"n\":" [0-9]{1,3} "}")"), s.vocab, 2);
  const int64_t V = s.engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(6, V, 51), test::random_prompt(9, V, 52)};
  for (int k : {0, 1, 3, 4}) {
    GrammarMask mask(g);
    GenerateOptions o;
    o.max_new_tokens = 40;
    o.eos = kEos;
    o.mask = &mask;
    o.draft_tokens = k;
    for (const auto& out : test::generate(*s.engine, prompts, o)) {
      EXPECT_TRUE(out.stopped_at_eos) << "k = " << k << ": " << out.tokens.size() << " tokens without EOS";
      EXPECT_LE(out.tokens.size(), 12u);
      std::string why;
      EXPECT_TRUE(replay(g, out.tokens, &why)) << why;
    }
  }
}

TEST(GrammarDecoding, SampledTokensStayInTheGrammar) {
  Fixture& s = fixture();
  const int64_t V = s.engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(7, V, 61), test::random_prompt(12, V, 62)};
  for (int k : {0, 3}) {
    GrammarMask mask(s.grammar);
    GenerateOptions o;
    o.max_new_tokens = 80;
    o.eos = kEos;
    o.mask = &mask;
    o.draft_tokens = k;
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 9;
    DecodeMetrics m;
    for (const auto& out : test::generate(*s.engine, prompts, o, &m)) {
      std::string why;
      const bool complete = replay(s.grammar, out.tokens, &why);
      EXPECT_TRUE(why.empty()) << "k = " << k << ": " << why;
      if (out.stopped_at_eos) {
        EXPECT_TRUE(complete);
      }
    }
    if (k > 0) {
      EXPECT_GT(m.drafted, 0);
    }
  }
}

// The decoder asks for the mask of every draft depth with the drafts before it in the context:
// a </think> drafted at depth 2 makes depth 3 constrained, and rolling it back frees it again.
TEST(GrammarDecoding, ReasoningEndsWhereverItsEndTokenFallsEvenInADraft) {
  Fixture& s = fixture();
  GrammarMask mask(s.grammar, {true, kThinkEnd});
  const int64_t V = s.engine->config().vocab_size;
  std::vector<uint64_t> allowed(mask_words(size_t(V)));
  const std::vector<int32_t> prompt = {7, 8, 9};
  mask.begin(0, prompt.size());
  auto allowed_after = [&](std::vector<int32_t> output) {
    std::vector<int32_t> context = prompt;
    context.insert(context.end(), output.begin(), output.end());
    mask.allowed_tokens(0, context, allowed);
    return int64_t(count_allowed(allowed, size_t(V)));
  };
  const int32_t brace = test::kVocabFirstAscii + ('{' - 0x20), x = test::kVocabFirstAscii + ('x' - 0x20);
  EXPECT_EQ(allowed_after({}), V - 1);                  // reasoning: everything but EOS
  EXPECT_EQ(allowed_after({x, x}), V - 1);              // free text, any token
  const int64_t constrained = allowed_after({x, kThinkEnd});  // </think> as draft 2: draft 3 is under the grammar
  EXPECT_LT(constrained, 40);
  EXPECT_TRUE(is_allowed(allowed, size_t(brace)));
  EXPECT_FALSE(is_allowed(allowed, size_t(x)));
  EXPECT_FALSE(is_allowed(allowed, size_t(kEos)));
  EXPECT_EQ(allowed_after({x, kThinkEnd, brace}) > 0, true);
  EXPECT_EQ(allowed_after({x, x, x}), V - 1);           // the drafts were rejected: free again
  EXPECT_EQ(mask.counters().free_masks, 3);
  EXPECT_EQ(mask.counters().masks, 2);
}

// A context holding a token the grammar does not allow is an engine bug: named, not ignored.
TEST(GrammarDecoding, AForbiddenTokenInTheContextIsReportedNotSkipped) {
  Fixture& s = fixture();
  GrammarMask mask(s.grammar);
  std::vector<uint64_t> allowed(mask_words(size_t(s.engine->config().vocab_size)));
  mask.begin(0, 2);
  const std::vector<int32_t> context = {5, 6, kOtherSpecial};
  try {
    mask.allowed_tokens(0, context, allowed);
    FAIL() << "a special token inside the grammar was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 2 at output position 0"), std::string::npos) << e.what();
  }
}

// The mask-time report of `generate --json`: quantiles from a log-spaced histogram (4 buckets
// per doubling), each the upper edge of the bucket that holds it.
TEST(GrammarMaskCounters, QuantilesAreTheUpperEdgesOfTheirBuckets) {
  grammar::GrammarMask::Counters c;
  for (int i = 0; i < 98; ++i) c.record(3e-6);  // 3 µs: bucket ceil(4·log2 3) = 7, edge 2^(7/4) ≈ 3.36 µs
  c.record(100e-6);                             // bucket 27, edge 2^(27/4) ≈ 107.6 µs
  c.record(1.0);                                // beyond the last bucket: counted in it
  EXPECT_NEAR(c.percentile_us(0.5), std::exp2(7.0 / 4), 1e-9);
  EXPECT_NEAR(c.percentile_us(0.98), std::exp2(7.0 / 4), 1e-9);
  EXPECT_NEAR(c.percentile_us(0.99), std::exp2(27.0 / 4), 1e-9);
  EXPECT_NEAR(c.percentile_us(1.0), std::exp2(double(c.kBuckets - 1) / 4), 1e-9);
  EXPECT_NEAR(c.max_seconds, 1.0, 1e-12);
  EXPECT_NEAR(c.seconds, 98 * 3e-6 + 100e-6 + 1.0, 1e-12);
  EXPECT_EQ(grammar::GrammarMask::Counters{}.percentile_us(0.5), 0.0);  // nothing recorded
}

}  // namespace
}  // namespace dsv4
