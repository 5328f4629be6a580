// Speculative greedy decoding is token-identical to plain greedy decoding: for k = 1, 2, 3
// and 8 drafts, 256 new tokens, single sequences and a batch of three prompts of different
// lengths, with the full and a limited draft vocabulary, at EOS and at the length limit, on
// tiny-a and generated configs: random ones (drafts almost always rejected) and mirror ones
// (other windows, heads, experts and layer orders; drafts accepted often, not always).
#include <gtest/gtest.h>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

struct Config {
  std::string name;
  std::string preset;  // tiny (random weights) or mirror (partial acceptance)
  std::vector<std::string> set;
  std::vector<int64_t> ratios;
  bool mirror() const { return preset == "mirror"; }
};
void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

std::filesystem::path checkpoint(const Config& c) {
  if (c.name == "tiny_a") return test::tiny_a_dir();
  return test::generated_checkpoint(c.name, c.preset, 3, c.set, c.ratios, c.mirror() ? test::kTestPerturb : 0.0);
}

// The drafting path ran: drafts were made — and, on a mirror config, some accepted, some not.
void expect_drafting(const Config& c, const DecodeMetrics& m, const std::string& what) {
  EXPECT_GT(m.drafted, 0) << what;
  if (!c.mirror()) return;
  EXPECT_GT(m.accepted, m.drafted / 5) << what;
  EXPECT_GT(m.rejected_steps + m.partial_steps, 0) << what;
}

class SpeculativeGreedyTest : public ::testing::TestWithParam<Config> {};

TEST_P(SpeculativeGreedyTest, DraftsNeverChangeTheGreedyOutput) {
  auto engine = Engine::open(checkpoint(GetParam()), {test::test_backend(), true, 0, 16});
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
    // Only a sequence's last steps (at most k of them) may draft fewer than k: the length limit.
    ASSERT_EQ(m.drafted_at.size(), size_t(k));
    EXPECT_GE(m.drafted_at[size_t(k - 1)], m.sequence_steps - 3 * k) << "k = " << k << ": steps drafted fewer than k";
    expect_drafting(GetParam(), m, "batch, k = " + std::to_string(k));
    if (GetParam().mirror() && k > 1) { EXPECT_GT(m.partial_steps, 0) << "k = " << k; }
  }
  for (int k : {1, 3}) {  // single sequences
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto single = test::generate(*engine, {prompts[1]}, o, &m);
    EXPECT_EQ(single[0].tokens, plain[1].tokens) << "single sequence, k = " << k;
    expect_drafting(GetParam(), m, "single, k = " + std::to_string(k));
  }
}

TEST_P(SpeculativeGreedyTest, LimitedDraftVocabularyKeepsTheOutput) {
  const auto dir = checkpoint(GetParam());
  auto full = Engine::open(dir, {test::test_backend(), false, 0, 16});
  const int64_t V = full->config().vocab_size;
  auto limited = Engine::open(dir, {test::test_backend(), true, V / 3, 16});
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(9, V, 4), test::random_prompt(30, V, 5)};
  GenerateOptions o;
  o.max_new_tokens = 256;
  const auto plain = test::generate(*full, prompts, o);
  for (int k : {2, 3}) {
    o.draft_tokens = k;
    o.record_steps = true;
    DecodeMetrics m;
    const auto spec = test::generate(*limited, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "mtp vocab " << V / 3 << ", sequence " << i << ", k = " << k;
      for (const StepRecord& st : spec[i].steps)
        for (int32_t d : st.drafts) EXPECT_LT(d, V / 3) << "a draft outside the limited draft head";
    }
    EXPECT_GT(m.drafted, 0);
  }
}

TEST_P(SpeculativeGreedyTest, StopsAtEosExactlyWherePlainDecodingStops) {
  auto engine = Engine::open(checkpoint(GetParam()), {test::test_backend(), true, 0, 16});
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
    DecodeMetrics m;
    const auto spec = test::generate(*engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "sequence " << i << ", k = " << k;
      EXPECT_EQ(spec[i].stopped_at_eos, plain[i].stopped_at_eos);
    }
    expect_drafting(GetParam(), m, "EOS, k = " + std::to_string(k));
  }
  // max_new_tokens ends generation exactly (the last step drafts only what can still be emitted).
  o.eos.reset();
  for (int64_t n : {1, 2, 3, 5, 7}) {
    o.max_new_tokens = n;
    o.draft_tokens = 3;
    DecodeMetrics m;
    const auto spec = test::generate(*engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(spec[i].tokens, std::vector<int32_t>(free_run[i].tokens.begin(), free_run[i].tokens.begin() + n));
    if (n >= 3) { EXPECT_GT(m.drafted, 0) << "max_new_tokens " << n; }
    if (n >= 5 && GetParam().mirror()) { EXPECT_GT(m.accepted, 0) << "max_new_tokens " << n; }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SpeculativeGreedyTest,
    ::testing::Values(Config{"tiny_a", "tiny", {}, {}},
                      Config{"spec_window8_heads8", "tiny", {"sliding_window=8", "num_attention_heads=8", "o_groups=4"},
                             {4, 128, 0}},
                      Config{"spec_experts16", "tiny", {"n_routed_experts=16", "num_experts_per_tok=3", "index_topk=2",
                                                        "sliding_window=16", "vocab_size=512"}, {128, 4}},
                      Config{"mirror_window8_heads8", "mirror",
                             {"sliding_window=8", "num_attention_heads=8", "o_groups=4"}, {0, 4, 128}},
                      Config{"mirror_experts16", "mirror", {"n_routed_experts=16", "num_experts_per_tok=3",
                                                            "index_topk=2", "sliding_window=16", "vocab_size=512"},
                             {0, 128, 4}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dsv4
