// Constrained decoding: a mask whose allowed set depends on the previous token. Drafts
// are chosen under the mask of their own prefix, so every emitted token satisfies the
// mask and speculative greedy decoding still equals plain greedy decoding.
#include <gtest/gtest.h>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// Token v may follow context c iff (v + c.back()) % 3 != 0.
class ParityMask : public TokenMask {
 public:
  void allowed_tokens(size_t, std::span<const int32_t> context, std::span<uint8_t> allowed) const override {
    ++calls;
    for (size_t v = 0; v < allowed.size(); ++v) allowed[v] = (int64_t(v) + context.back()) % 3 != 0;
  }
  static bool ok(int32_t prev, int32_t v) { return (int64_t(v) + prev) % 3 != 0; }
  mutable int64_t calls = 0;
};

void expect_mask_respected(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
  int32_t prev = prompt.back();
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_TRUE(ParityMask::ok(prev, tokens[i])) << "token " << i << " = " << tokens[i] << " after " << prev;
    prev = tokens[i];
  }
}

TEST(Mask, EveryTokenSatisfiesTheMaskAndSpeculationKeepsTheOutput) {
  auto engine = Engine::open(test::tiny_a_dir(), {2, true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(8, V, 31), test::random_prompt(20, V, 32)};
  ParityMask mask;
  GenerateOptions o;
  o.max_new_tokens = 96;
  o.mask = &mask;
  const auto plain = test::generate(*engine, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) expect_mask_respected(prompts[i], plain[i].tokens);
  // The unmasked run differs (the mask is not vacuous).
  GenerateOptions free = o;
  free.mask = nullptr;
  EXPECT_NE(test::generate(*engine, prompts, free)[0].tokens, plain[0].tokens);

  for (int k : {1, 3, 8}) {
    o.draft_tokens = k;
    const auto spec = test::generate(*engine, prompts, o);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "k = " << k << ", sequence " << i;
      expect_mask_respected(prompts[i], spec[i].tokens);
    }
  }
}

TEST(Mask, SampledTokensSatisfyTheMask) {
  auto engine = Engine::open(test::generated_checkpoint("aligned", "aligned", 5), {2, true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(8, V, 41), test::random_prompt(3, V, 42)};
  ParityMask mask;
  GenerateOptions o;
  o.max_new_tokens = 64;
  o.mask = &mask;
  o.sampling = {1.0f, 0, 1.0f, 77};
  for (int k : {0, 2, 4}) {
    o.draft_tokens = k;
    const auto out = test::generate(*engine, prompts, o);
    for (size_t i = 0; i < prompts.size(); ++i) expect_mask_respected(prompts[i], out[i].tokens);
  }
}

}  // namespace
}  // namespace dsv4
