// GenerateOptions::top_logprobs: every emitted token carries its log-probability under the
// target's distribution at its position — log_softmax of the teacher-forced logits of
// prompt + generated tokens — with and without drafts (a token accepted from a draft is
// scored by the verification row that accepted it), and under greedy decoding the most
// likely alternative is the token itself.
#include <gtest/gtest.h>

#include <cmath>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::vector<double> log_softmax(const float* row, int64_t V) {
  double peak = row[0];
  for (int64_t v = 1; v < V; ++v) peak = std::max(peak, double(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - peak);
  std::vector<double> out(static_cast<size_t>(V));
  for (int64_t v = 0; v < V; ++v) out[size_t(v)] = double(row[v]) - peak - std::log(sum);
  return out;
}

TEST(Logprobs, GreedyTokensCarryTheTargetsLogSoftmax) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<int32_t> prompt = test::random_prompt(9, V, 7);
  for (int k : {0, 3}) {
    GenerateOptions o;
    o.max_new_tokens = 24;
    o.draft_tokens = k;
    o.top_logprobs = 3;
    DecodeMetrics m;
    const auto out = test::generate(*engine, {prompt}, o, &m);
    if (k > 0) {
      EXPECT_GT(m.accepted, 0) << "some tokens must come from accepted drafts";
    }
    const auto& tokens = out[0].tokens;
    ASSERT_EQ(out[0].logprobs.size(), tokens.size()) << "k = " << k;
    const auto all = test::concat(prompt, tokens);
    const test::TeacherForced forced = test::teacher_forced(*engine, all);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const auto expected = log_softmax(forced.logits_row(0, int64_t(prompt.size() + i - 1)), V);
      const TokenLogprobs& lp = out[0].logprobs[i];
      EXPECT_NEAR(lp.logprob, expected[size_t(tokens[i])], 1e-3) << "k = " << k << ", token " << i;
      ASSERT_EQ(lp.top.size(), 3u);
      EXPECT_EQ(lp.top[0].first, tokens[i]) << "greedy: the top alternative is the token itself";
      EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
      EXPECT_GE(lp.top[0].second, lp.top[1].second);
      EXPECT_GE(lp.top[1].second, lp.top[2].second);
      EXPECT_NEAR(lp.top[1].second, expected[size_t(lp.top[1].first)], 1e-3);
    }
  }
}

TEST(Logprobs, OffByDefault) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  GenerateOptions o;
  o.max_new_tokens = 4;
  const auto out = test::generate(*engine, {test::random_prompt(5, engine->config().vocab_size, 1)}, o);
  EXPECT_TRUE(out[0].logprobs.empty());
}

}  // namespace
}  // namespace dsv4
