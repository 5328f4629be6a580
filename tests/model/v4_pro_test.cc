// DeepSeek-V4-Pro's shape (shared/design: v4-pro): no window-only layer — its first layers have a
// ratio-128 compressor *and* are hash-routed — more heads per output group, a larger index top-k.
// No golden of DeepSeek's reference code exists at Pro's shape here: the expectations are the
// reference backend's plain math (the CPU backend's kernels against it, at the tolerances of the
// golden tests) and invariants (speculation lossless, chunking and batching bit-exact: the
// determinism suite runs a tiny-pro case too). Prompts of 300 tokens cross two ratio-128 blocks of
// the hash-routed layers.
#include <gtest/gtest.h>

#include <cstring>

#include "model/model_files.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::filesystem::path tiny_pro() { return test::generated_checkpoint("tiny-pro", "tiny-pro", 1); }

// Pro's pattern with weights that make the MTP agree with the target: drafts accepted, the
// accepted-draft path through ratio-128 hash layers.
std::filesystem::path aligned_pro() {
  return test::generated_checkpoint("aligned-pro", "aligned", 7, {"num_hash_layers=2"}, {128, 128, 4, 128});
}

TEST(TinyPro, HasV4ProsLayerPattern) {
  auto files = ModelFiles::open(tiny_pro());
  const ModelConfig& c = files->config;
  ASSERT_EQ(c.num_hidden_layers, 4);
  for (int64_t i : {0, 1}) {
    const BlockWeights& b = files->weights.layers[size_t(i)];
    EXPECT_EQ(b.compress_ratio, 128) << "layer " << i;
    EXPECT_TRUE(b.hash_routed) << "layer " << i;
    EXPECT_TRUE(b.attn.compressor.has_value()) << "layer " << i;
    EXPECT_FALSE(b.attn.indexer.has_value()) << "layer " << i << ": ratio 128 has no indexer";
    EXPECT_TRUE(b.ffn.tid2eid.present()) << "layer " << i;
    EXPECT_FALSE(b.ffn.bias.present()) << "layer " << i << ": hash-routed, no score bias";
  }
  EXPECT_EQ(files->weights.layers[2].compress_ratio, 4);
  EXPECT_TRUE(files->weights.layers[2].attn.indexer.has_value());
  for (const BlockWeights& b : files->weights.layers) EXPECT_NE(b.compress_ratio, 0) << "layer " << b.layer;
  EXPECT_GT(c.num_attention_heads / c.o_groups, 1);
  ASSERT_TRUE(files->has_mtp());
}

// Teacher-forced logits of every row of `tokens` (a prompt of P, then one token a call).
std::vector<float> logits_of(Engine& e, const std::vector<int32_t>& tokens, int64_t P) {
  auto seq = e.target->new_sequence();
  Transformer::Output out;
  Transformer::Request prompt{seq.get(), std::span<const int32_t>(tokens.data(), size_t(P)), /*all_logits=*/true};
  e.target->forward(std::span(&prompt, 1), out);
  std::vector<float> logits = out.logits;
  for (size_t t = size_t(P); t < tokens.size(); ++t) {
    Transformer::Request step{seq.get(), std::span<const int32_t>(&tokens[t], 1), true};
    e.target->forward(std::span(&step, 1), out);
    logits.insert(logits.end(), out.logits.begin(), out.logits.end());
  }
  return logits;
}

TEST(TinyPro, CpuKernelsMatchTheReferenceBackend) {
  auto cpu = Engine::open(tiny_pro(), {.backend = {BackendKind::Cpu, 2}, .load_mtp = false});
  auto ref = Engine::open(tiny_pro(), {.backend = {BackendKind::Reference, 1}, .load_mtp = false});
  const int64_t V = cpu->config().vocab_size;
  const auto tokens = test::random_prompt(300, V, 5);
  const auto a = logits_of(*cpu, tokens, 280), b = logits_of(*ref, tokens, 280);
  ASSERT_EQ(a.size(), size_t(300 * V));
  const test::ErrorSummary e = test::summarize(test::row_rel_l2(a, b, V));
  std::printf("tiny-pro, cpu vs reference, rel-L2 per row: median %.4f  p90 %.4f  max %.4f\n", e.median, e.p90, e.max);
  EXPECT_EQ(e.nonfinite, 0u);
  EXPECT_LE(e.median, 0.03);
  EXPECT_LE(e.p90, 0.06);
  EXPECT_LE(e.max, 0.3);
  // (the two disagree somewhere: the comparison compared something)
  EXPECT_GT(e.max, 0.0);
}

// Speculative greedy decoding is plain greedy decoding, on drafts the target rejects (random
// weights: every step rolls back through the ratio-128 caches) and on drafts it accepts.
TEST(TinyPro, SpeculativeGreedyEqualsPlainWhetherDraftsAreRejectedOrAccepted) {
  struct Case {
    std::filesystem::path dir;
    bool accepted;
  };
  for (const Case& c : {Case{tiny_pro(), false}, Case{aligned_pro(), true}}) {
    auto engine = Engine::open(c.dir, {test::test_backend(), true, 0, 16});
    const auto prompts = std::vector{test::random_prompt(131, engine->config().vocab_size, 2),
                                     test::random_prompt(9, engine->config().vocab_size, 3)};
    GenerateOptions o;
    o.max_new_tokens = 200;  // (the first prompt's sequence reaches its third ratio-128 block)
    const auto plain = test::generate(*engine, prompts, o);
    for (int k : {1, 3}) {
      o.draft_tokens = k;
      DecodeMetrics m;
      const auto speculative = test::generate(*engine, prompts, o, &m);
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(speculative[i].tokens, plain[i].tokens) << c.dir << ", k = " << k << ", sequence " << i;
      EXPECT_GT(m.drafted, 100) << c.dir;
      if (c.accepted) {
        EXPECT_GT(m.accepted, m.drafted * 9 / 10) << c.dir << ", k = " << k;
      } else {
        EXPECT_GT(m.rejected_steps, m.sequence_steps / 2) << c.dir << ", k = " << k;
      }
    }
  }
}

// A long prompt prefilled in chunks (as serve and generate do) gives the bits of one pass.
TEST(TinyPro, ChunkedPrefillIsBitExact) {
  auto engine = Engine::open(tiny_pro(), {test::test_backend(), false});
  const auto tokens = test::random_prompt(300, engine->config().vocab_size, 8);
  GenerateOptions o;
  o.max_new_tokens = 12;
  SpeculativeDecoder whole(*engine->target, nullptr), chunked(*engine->target, nullptr);
  whole.set_prefill_chunk(300);
  chunked.set_prefill_chunk(37);
  const std::vector<std::vector<int32_t>> prompt{tokens};
  const auto a = whole.generate(prompt, o);
  const auto b = chunked.generate(prompt, o);
  EXPECT_EQ(a[0].tokens, b[0].tokens);
  const auto one = logits_of(*engine, tokens, 300);
  std::vector<float> parts;
  {
    auto seq = engine->target->new_sequence();
    Transformer::Output out;
    for (size_t at = 0; at < tokens.size(); at += 37) {
      const size_t n = std::min<size_t>(37, tokens.size() - at);
      Transformer::Request r{seq.get(), std::span<const int32_t>(tokens.data() + at, n), true};
      engine->target->forward(std::span(&r, 1), out);
      parts.insert(parts.end(), out.logits.begin(), out.logits.end());
    }
  }
  ASSERT_EQ(one.size(), parts.size());
  EXPECT_EQ(0, std::memcmp(one.data(), parts.data(), one.size() * sizeof(float)));
}

}  // namespace
}  // namespace dsv4
