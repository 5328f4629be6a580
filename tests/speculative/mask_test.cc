// Constrained decoding with drafts, on the partial-acceptance (mirror) preset:
// - a mask whose allowed set depends on the previous token: every emitted token satisfies
//   it, speculative greedy equals plain greedy under it, and each draft position was chosen
//   under the mask of its own prefix (drafts before it included) — checked draft by draft;
// - a mask that leaves the (limited) draft head no token at some position truncates the
//   chain exactly there, and the target still decodes as without drafts;
// - sampled tokens satisfy the mask.
// Each test asserts that drafts were made and that steps accepted some drafts, not all.
#include <gtest/gtest.h>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// Token v may follow context c iff (v + c.back()) % 3 != 0.
class ParityMask : public TokenMask {
 public:
  void allowed_tokens(size_t, std::span<const int32_t> context, std::span<uint64_t> allowed) const override {
    ++calls;
    std::fill(allowed.begin(), allowed.end(), uint64_t(0));
    for (size_t v = 0; v < allowed.size() * 64; ++v)
      if ((int64_t(v) + context.back()) % 3 != 0) allow(allowed, v);
  }
  static bool ok(int32_t prev, int32_t v) { return (int64_t(v) + prev) % 3 != 0; }
  mutable int64_t calls = 0;
};

void expect_mask_respected(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens, size_t expected) {
  ASSERT_EQ(tokens.size(), expected);
  int32_t prev = prompt.back();
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_TRUE(ParityMask::ok(prev, tokens[i])) << "token " << i << " = " << tokens[i] << " after " << prev;
    prev = tokens[i];
  }
}

TEST(Mask, DraftsFollowTheMaskOfTheirOwnPrefixAndKeepTheOutput) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(8, V, 31), test::random_prompt(20, V, 32)};
  ParityMask mask;
  GenerateOptions o;
  o.max_new_tokens = 200;
  o.mask = &mask;
  const auto plain = test::generate(*engine, prompts, o);
  EXPECT_GT(mask.calls, 0);
  for (size_t i = 0; i < prompts.size(); ++i) expect_mask_respected(prompts[i], plain[i].tokens, 200);
  GenerateOptions free = o;
  free.mask = nullptr;
  EXPECT_NE(test::generate(*engine, prompts, free)[0].tokens, plain[0].tokens) << "the mask changes nothing";

  for (int k : {1, 3, 8}) {
    o.draft_tokens = k;
    o.record_steps = true;
    DecodeMetrics m;
    const auto spec = test::generate(*engine, prompts, o, &m);
    int64_t checked_deep = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "k = " << k << ", sequence " << i;
      expect_mask_respected(prompts[i], spec[i].tokens, 200);
      const std::vector<int32_t> all = test::concat(prompts[i], spec[i].tokens);
      for (const StepRecord& s : spec[i].steps) {
        int32_t prev = all[size_t(s.position)];  // the last token: d_1 follows it
        for (size_t j = 0; j < s.drafts.size(); ++j) {
          EXPECT_TRUE(ParityMask::ok(prev, s.drafts[j])) << "draft " << j + 1 << " at position " << s.position
                                                         << " ignores the mask of its own prefix";
          checked_deep += j > 0;
          prev = s.drafts[j];
        }
      }
    }
    std::printf("k=%d under the mask: drafted %lld, accepted %lld, partial steps %lld\n", k, (long long)m.drafted,
                (long long)m.accepted, (long long)m.partial_steps);
    EXPECT_GT(m.accepted, m.drafted / 4) << "k = " << k;
    if (k > 1) {
      EXPECT_GT(checked_deep, 100);
      EXPECT_GT(m.partial_steps, 10) << "k = " << k;
    }
  }
}

// After an even token only the upper half of the vocabulary is allowed, which a draft head
// limited to the lower half cannot say: the chain must stop right after an even draft.
class UpperHalfAfterEven : public TokenMask {
 public:
  explicit UpperHalfAfterEven(int64_t V) : half_(V / 2) {}
  void allowed_tokens(size_t, std::span<const int32_t> context, std::span<uint64_t> allowed) const override {
    const bool even = context.back() % 2 == 0;
    std::fill(allowed.begin(), allowed.end(), uint64_t(0));
    for (size_t v = 0; v < allowed.size() * 64; ++v)
      if (!even || int64_t(v) >= half_) allow(allowed, v);
  }

 private:
  int64_t half_;
};

TEST(Mask, AMaskTheDraftHeadCannotMeetTruncatesTheChainThere) {
  const auto dir = test::mirror_checkpoint();
  auto full = Engine::open(dir, {test::test_backend(), false, 0, 16});
  const int64_t V = full->config().vocab_size;
  auto limited = Engine::open(dir, {test::test_backend(), true, V / 2, 16});
  const UpperHalfAfterEven mask(V);
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(11, V, 33), test::random_prompt(26, V, 34)};
  GenerateOptions o;
  o.max_new_tokens = 250;
  o.mask = &mask;
  const auto plain = test::generate(*full, prompts, o);
  const int k = 4;
  o.draft_tokens = k;
  o.record_steps = true;
  DecodeMetrics m;
  const auto spec = test::generate(*limited, prompts, o, &m);
  int64_t truncated = 0, undrafted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "sequence " << i;
    const std::vector<int32_t> all = test::concat(prompts[i], spec[i].tokens);
    for (const StepRecord& s : spec[i].steps) {
      const size_t n = s.drafts.size();
      const int64_t emitted_before = s.position + 1 - int64_t(prompts[i].size());
      const bool capped = int64_t(n) == o.max_new_tokens - emitted_before - 1;  // the length limit, not the mask
      for (size_t j = 0; j + 1 < n; ++j) EXPECT_EQ(s.drafts[j] % 2, 1) << "the chain went on after an even draft";
      for (int32_t d : s.drafts) EXPECT_LT(d, V / 2) << "a draft outside the draft head";
      if (n == 0 && !capped) {
        EXPECT_EQ(all[size_t(s.position)] % 2, 0) << "no draft although the mask allowed the draft head's tokens";
        ++undrafted;
      } else if (n < size_t(k) && !capped) {
        EXPECT_EQ(s.drafts.back() % 2, 0) << "the chain stopped although the mask allowed more";
        ++truncated;
      }
    }
  }
  std::printf("chains truncated mid-way by the mask: %lld; steps without drafts: %lld; accepted %lld of %lld, "
              "partial steps %lld\n", (long long)truncated, (long long)undrafted, (long long)m.accepted,
              (long long)m.drafted, (long long)m.partial_steps);
  EXPECT_GT(truncated, 10);
  EXPECT_GT(undrafted, 10);
  EXPECT_GT(m.accepted, 0);
  EXPECT_GT(m.partial_steps, 0);
}

TEST(Mask, SampledTokensSatisfyTheMask) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(8, V, 41), test::random_prompt(3, V, 42)};
  ParityMask mask;
  GenerateOptions o;
  o.max_new_tokens = 64;
  o.mask = &mask;
  o.sampling = {1.0f, 0, 1.0f, 77};
  for (int k : {0, 2, 4}) {
    o.draft_tokens = k;
    DecodeMetrics m;
    const auto out = test::generate(*engine, prompts, o, &m);
    for (size_t i = 0; i < prompts.size(); ++i) expect_mask_respected(prompts[i], out[i].tokens, 64);
    if (k > 0) { EXPECT_GT(m.accepted, 0) << "k = " << k; }
  }
}

}  // namespace
}  // namespace dsv4
