// Speculative greedy decoding is token-identical to plain greedy decoding: for k = 1, 2, 3
// and 8 drafts, 256 new tokens, single sequences and a batch of three prompts of different
// lengths, with the full and a limited draft vocabulary, on tiny-a and generated configs.
#include <gtest/gtest.h>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

struct Config {
  std::string name;
  std::vector<std::string> set;
  std::vector<int64_t> ratios;
};
void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

std::filesystem::path checkpoint(const Config& c) {
  if (c.name == "tiny_a") return test::tiny_a_dir();
  return test::generated_checkpoint(c.name, "tiny", 3, c.set, c.ratios);
}

class SpeculativeGreedyTest : public ::testing::TestWithParam<Config> {};

TEST_P(SpeculativeGreedyTest, DraftsNeverChangeTheGreedyOutput) {
  auto engine = Engine::open(checkpoint(GetParam()), {2, true, 0, 16});
  ASSERT_TRUE(engine->proposer) << "the checkpoint must have an MTP module";
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(5, V, 1), test::random_prompt(23, V, 2),
                                                     test::random_prompt(41, V, 3)};
  GenerateOptions o;
  o.max_new_tokens = 256;
  const auto plain = test::generate(*engine, prompts, o);
  for (auto& s : plain) ASSERT_EQ(s.tokens.size(), 256u);

  for (int k : {1, 2, 3, 8}) {
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto batch = test::generate(*engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(batch[i].tokens, plain[i].tokens) << "batch of 3, sequence " << i << ", k = " << k;
    EXPECT_EQ(m.drafted_at.size(), size_t(k));
    EXPECT_GT(m.drafted, 0);
  }
  for (int k : {1, 3}) {  // single sequences
    o.draft_tokens = k;
    const auto single = test::generate(*engine, {prompts[1]}, o);
    EXPECT_EQ(single[0].tokens, plain[1].tokens) << "single sequence, k = " << k;
  }
}

TEST_P(SpeculativeGreedyTest, LimitedDraftVocabularyKeepsTheOutput) {
  const auto dir = checkpoint(GetParam());
  auto full = Engine::open(dir, {2, false, 0, 16});
  const int64_t V = full->config().vocab_size;
  auto limited = Engine::open(dir, {2, true, V / 3, 16});
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(9, V, 4), test::random_prompt(30, V, 5)};
  GenerateOptions o;
  o.max_new_tokens = 256;
  const auto plain = test::generate(*full, prompts, o);
  for (int k : {2, 3}) {
    o.draft_tokens = k;
    const auto spec = test::generate(*limited, prompts, o);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "mtp vocab " << V / 3 << ", sequence " << i << ", k = " << k;
  }
}

TEST_P(SpeculativeGreedyTest, StopsAtEosExactlyWherePlainDecodingStops) {
  auto engine = Engine::open(checkpoint(GetParam()), {2, true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(7, V, 6), test::random_prompt(12, V, 7)};
  GenerateOptions o;
  o.max_new_tokens = 60;
  const auto free_run = test::generate(*engine, prompts, o);
  o.eos = free_run[0].tokens[37];  // a token the first sequence emits mid-way
  const auto plain = test::generate(*engine, prompts, o);
  ASSERT_TRUE(plain[0].stopped_at_eos);
  ASSERT_EQ(plain[0].tokens.back(), *o.eos);
  for (int k : {2, 8}) {
    o.draft_tokens = k;
    const auto spec = test::generate(*engine, prompts, o);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "sequence " << i << ", k = " << k;
      EXPECT_EQ(spec[i].stopped_at_eos, plain[i].stopped_at_eos);
    }
  }
  // max_new_tokens cuts a step's accepted drafts exactly.
  o.eos.reset();
  for (int64_t n : {1, 2, 7}) {
    o.max_new_tokens = n;
    o.draft_tokens = 3;
    const auto spec = test::generate(*engine, prompts, o);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(spec[i].tokens, std::vector<int32_t>(free_run[i].tokens.begin(), free_run[i].tokens.begin() + n));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SpeculativeGreedyTest,
    ::testing::Values(Config{"tiny_a", {}, {}},
                      Config{"spec_window8_heads8", {"sliding_window=8", "num_attention_heads=8", "o_groups=4"}, {4, 128, 0}},
                      Config{"spec_experts16", {"n_routed_experts=16", "num_experts_per_tok=3", "index_topk=2",
                                                "sliding_window=16", "vocab_size=512"}, {128, 4}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dsv4
