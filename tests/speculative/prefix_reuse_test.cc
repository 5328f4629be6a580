// Exact prefix reuse (prefix_cache.h): a sequence started from another's state cut at a length
// gives bit-identical tokens and logprobs to the same sequence prefilled cold — greedy and seeded
// sampling, drafts k = 0..3 — for cuts inside the first window, mid compressor block (ratio 4 and
// 128), on block borders, far past the window, one token before the end of the kept sequence, at
// its end, for a prompt equal to it and one that is a strict prefix of it. Each run also asserts
// what proves the path was taken: the tokens reused, the rows prefilled (only the rest), blocks
// shared rather than copied. With MTP drafting, the kept prompt's drafter rows before its last
// window were never computed: a cut that needs them starts the drafter afresh where the new
// prompt's rest gives it the window its first draft reads, and the target reuses up to there.
#include <gtest/gtest.h>

#include "speculative/prefix_cache.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

struct Outcome {
  SequenceOutput out;
  DecodeMetrics metrics;
  int64_t reused = 0, shared_blocks = 0;
};

// One sequence on a fresh decoder: cold, or from `from` cut at `cut`.
Outcome run(Engine& engine, const std::vector<int32_t>& prompt, const GenerateOptions& o, const PrefixSource* from = nullptr,
        int64_t cut = 0) {
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  decoder.set_prefill_chunk(48);  // several chunks for the longer rests
  const auto id = from ? decoder.add(prompt, o, *from, cut) : decoder.add(prompt, o);
  Outcome r;
  r.reused = decoder.reused(id);
  bool first = true;
  while (!decoder.finished(id)) {
    decoder.step();
    if (first && from) r.shared_blocks = decoder.source(id).cache->shared_blocks();
    first = false;
  }
  r.metrics = decoder.metrics();
  r.out = decoder.release(id);
  return r;
}

// The kept sequence: a 300-token prompt and 40 generated tokens, every row kept.
SequenceState kept_sequence(Engine& engine, int draft) {
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.draft_tokens = draft;
  o.keep_state = true;
  o.reusable = true;
  const auto id = decoder.add(test::random_prompt(300, engine.config().vocab_size, 71), o);
  while (!decoder.finished(id)) decoder.step();
  SequenceState s = decoder.take_state(id);
  decoder.release(id);
  return s;
}

void expect_same(const Outcome& cold, const Outcome& cached, const std::string& what) {
  ASSERT_EQ(cached.out.tokens, cold.out.tokens) << what;
  ASSERT_EQ(cached.out.logprobs.size(), cold.out.logprobs.size()) << what;
  for (size_t i = 0; i < cold.out.logprobs.size(); ++i) {
    const TokenLogprobs &a = cold.out.logprobs[i], &b = cached.out.logprobs[i];
    ASSERT_TRUE(test::same_bits(&a.logprob, &b.logprob, 1)) << what << ", token " << i;
    ASSERT_EQ(a.top.size(), b.top.size()) << what;
    for (size_t j = 0; j < a.top.size(); ++j) {
      ASSERT_EQ(a.top[j].first, b.top[j].first) << what << ", token " << i;
      ASSERT_TRUE(test::same_bits(&a.top[j].second, &b.top[j].second, 1)) << what << ", token " << i;
    }
  }
}

struct Cut {
  std::string name;
  int64_t shared;  // tokens the prompt shares with the kept sequence's (its prompt and output)
  int64_t prompt;  // the prompt's length (a different suffix past `shared`)
};

// The prompts of the cuts, for a kept sequence of n tokens (its caches hold n - 1: the last
// generated one was not passed; tiny dimensions: window 32, ratios 4 and 128).
std::vector<Cut> cuts(int64_t n) {
  return {{"inside the first window", 21, 60},
          {"mid ratio-4 block", 51, 90},
          {"on a ratio-128 block border", 129, 150},
          {"mid ratio-128 block", 200, 230},
          {"on the second ratio-128 border, far past the window", 257, 280},
          {"one token before the kept end", n - 2, n + 20},
          {"at the kept end, then more (a conversation's next turn)", n, n + 20},
          {"equal to the kept sequence", n, n},
          {"a strict prefix of it", 100, 100}};
}

std::vector<int32_t> prompt_for(const SequenceState& kept, const Cut& c, int64_t vocab) {
  std::vector<int32_t> p(kept.tokens.begin(), kept.tokens.begin() + c.shared);
  if (c.prompt == c.shared) return p;
  for (int32_t t : test::random_prompt(c.prompt - c.shared, vocab, 500 + uint64_t(c.shared))) {
    if (p.size() == size_t(c.shared) && size_t(c.shared) < kept.tokens.size() && t == kept.tokens[size_t(c.shared)])
      t = (t + 1) % int32_t(vocab);  // the first token past the shared prefix differs
    p.push_back(t);
  }
  return p;
}

void cached_equals_cold(Engine& engine, const std::vector<int>& drafts) {
  const int64_t V = engine.config().vocab_size;
  const SequenceState kept = kept_sequence(engine, engine.proposer ? 2 : 0);
  ASSERT_EQ(kept.length(), 339);
  ASSERT_EQ(kept.tokens.size(), 340u);
  const PrefixSource source{kept.tokens, kept.cache.get(), kept.draft.get()};
  int64_t compared = 0;
  for (const Cut& c : cuts(int64_t(kept.tokens.size()))) {
    const std::vector<int32_t> prompt = prompt_for(kept, c, V);
    // One short of the shared prefix, within the kept rows and short of the prompt's end.
    const int64_t cut = std::min<int64_t>({c.shared - 1, kept.length(), int64_t(prompt.size()) - 1});
    const int64_t W = engine.config().sliding_window, P = int64_t(prompt.size());
    for (int k : drafts) {
      // The kept drafter holds rows from 300 - W on (its prompt's last window): a cut needs [cut - W, cut).
      const bool restarts = k > 0 && engine.proposer && cut < 300;
      const int64_t reused = restarts ? std::min(cut, P - W) : cut;
      for (bool sampled : {false, true}) {
        const std::string what = c.name + ", k " + std::to_string(k) + (sampled ? ", sampled" : ", greedy");
        GenerateOptions o;
        o.max_new_tokens = 12;
        o.draft_tokens = k;
        o.top_logprobs = 2;
        if (sampled) {
          o.sampling.temperature = 1.0f;
          o.sampling.seed = 99;
        }
        const Outcome cold = run(engine, prompt, o);
        const Outcome cached = run(engine, prompt, o, &source, cut);
        EXPECT_EQ(cached.reused, reused) << what;
        EXPECT_EQ(cached.metrics.prefill_rows, P - reused) << what << ": only the rest prefilled";
        EXPECT_EQ(cold.metrics.prefill_rows, P) << what;
        if (reused >= 64) {
          EXPECT_GT(cached.shared_blocks, 0) << what << ": full blocks shared, not copied";
        }
        if (k > 0 && !sampled) {
          EXPECT_EQ(cached.metrics.drafted, cold.metrics.drafted) << what;
        }
        expect_same(cold, cached, what);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, int64_t(cuts(0).size() * drafts.size() * 2));
}

TEST(PrefixReuse, CachedEqualsColdAtEveryCutOnEveryLayerKind) {
  auto engine = Engine::open(test::generated_checkpoint("prefix_tiny", "tiny", 3), {test::test_backend(), true, 0, 16});
  cached_equals_cold(*engine, {0, 2});
}

TEST(PrefixReuse, CachedEqualsColdWithTheMtpDraftingAtEveryDepth) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  cached_equals_cold(*engine, {0, 1, 2, 3});
  EXPECT_EQ(engine->target->pools().blocks_in_use(), 0);
  EXPECT_EQ(engine->mtp->pools().blocks_in_use(), 0);
}

// A running sequence is a source too: a second request forks it mid-prefill, the first is then
// cancelled, and the second (and a third started from the second mid-decode) are still exact.
TEST(PrefixReuse, ALiveSourceMayBeCancelledWithoutHarmToItsForks) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<int32_t> system = test::random_prompt(200, V, 5);
  auto with = [&](uint64_t seed, int64_t n) {
    std::vector<int32_t> p = system;
    for (int32_t t : test::random_prompt(n, V, seed)) p.push_back(t);
    return p;
  };
  const std::vector<int32_t> a = with(6, 40), b = with(7, 30);
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.draft_tokens = 2;
  o.reusable = true;
  o.keep_state = true;
  o.top_logprobs = 1;
  const Outcome cold_b = run(*engine, b, o);

  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  decoder.set_prefill_chunk(64);
  const auto ia = decoder.add(a, o);
  decoder.step();
  decoder.step();  // a holds 128 tokens
  PrefixCache cache;
  const PrefixSource live[] = {decoder.source(ia)};
  const PrefixCache::Match m = cache.find(b, live);
  ASSERT_EQ(m.live, 0);
  ASSERT_EQ(m.cut, 128);  // all it holds: its MTP rows read a's next prompt token, b's too
  const auto ib = decoder.add(b, o, m.source, m.cut);
  EXPECT_EQ(decoder.reused(ib), 128);
  decoder.cancel(ia);  // mid-prefill
  decoder.release(ia);
  while (!decoder.finished(ib)) decoder.step();
  Outcome got;
  got.out = decoder.output(ib);
  expect_same(cold_b, got, "forked from a cancelled source");
  SequenceState kept_b = decoder.take_state(ib);
  decoder.release(ib);
  EXPECT_EQ(kept_b.length(), int64_t(b.size()) + 15);
  // b's state serves its own continuation.
  std::vector<int32_t> c = kept_b.tokens;  // b and every token generated
  for (int32_t t : test::random_prompt(12, V, 8)) c.push_back(t);
  cache.insert(std::move(kept_b));
  const PrefixCache::Match mc = cache.find(c);
  EXPECT_EQ(mc.live, -1);
  EXPECT_EQ(mc.cut, int64_t(b.size()) + 15) << "all the kept rows";
  const Outcome cold_c = run(*engine, c, o);
  const Outcome cached_c = run(*engine, c, o, &mc.source, mc.cut);
  EXPECT_EQ(cached_c.metrics.prefill_rows, int64_t(c.size()) - mc.cut);
  expect_same(cold_c, cached_c, "continuation of a kept fork");
  cache.clear();
  EXPECT_EQ(engine->target->pools().blocks_in_use(), 0);
}

// A sequence that stops at EOS inside a verified run of drafts holds rows of the drafts accepted
// past it; its kept state is cut back to its own tokens, and continues exactly. (The length never
// cuts a run: drafts are asked only for what may still be emitted.)
TEST(PrefixReuse, AKeptStateHoldsExactlyTheTokensItEmitted) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const std::vector<int32_t> prompt = test::random_prompt(40, V, 12);
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.draft_tokens = 3;
  o.keep_state = o.reusable = true;
  const std::vector<int32_t> free_run = test::generate(*engine, {prompt}, o)[0].tokens;
  for (size_t j = 1; j < 12; ++j) {
    if (std::find(free_run.begin(), free_run.begin() + j, free_run[j]) != free_run.begin() + j) continue;
    SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
    o.eos = free_run[j];  // stops at token j
    const auto id = decoder.add(prompt, o);
    while (!decoder.finished(id)) decoder.step();
    SequenceState kept = decoder.take_state(id);
    ASSERT_EQ(kept.tokens.size(), prompt.size() + j + 1);
    EXPECT_EQ(kept.length(), int64_t(kept.tokens.size()) - 1) << "EOS at " << j;
    std::vector<int32_t> next = kept.tokens;
    for (int32_t t : test::random_prompt(7, V, 13)) next.push_back(t);
    GenerateOptions g;
    g.max_new_tokens = 6;
    g.draft_tokens = 2;
    g.top_logprobs = 1;
    const PrefixSource from{kept.tokens, kept.cache.get(), kept.draft.get()};
    const Outcome cached = run(*engine, next, g, &from, kept.length());
    EXPECT_EQ(cached.reused, kept.length());
    expect_same(run(*engine, next, g), cached, "EOS at " + std::to_string(j) + ", continued");
  }
}

TEST(PrefixCache, FindsTheLongestUsablePrefixAndEvictsTheLeastRecentlyUsed) {
  auto engine = Engine::open(test::generated_checkpoint("prefix_tiny", "tiny", 3), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  SpeculativeDecoder decoder(*engine->target, nullptr);
  GenerateOptions o;
  o.max_new_tokens = 4;
  o.keep_state = true;
  o.reusable = true;
  auto kept = [&](const std::vector<int32_t>& prompt) {
    const auto id = decoder.add(prompt, o);
    while (!decoder.finished(id)) decoder.step();
    SequenceState s = decoder.take_state(id);
    decoder.release(id);
    return s;
  };
  const std::vector<int32_t> x = test::random_prompt(50, V, 1), y = test::random_prompt(50, V, 2);
  PrefixCache cache;
  SequenceState kx = kept(x);
  const std::vector<int32_t> x_tokens = kx.tokens;
  cache.insert(std::move(kx));
  cache.insert(kept(y));
  EXPECT_EQ(cache.size(), 2u);
  std::vector<int32_t> q(x.begin(), x.begin() + 30);
  q.push_back((x[30] + 1) % int32_t(V));
  EXPECT_EQ(cache.find(q).cut, 29);             // x, now the most recently used
  EXPECT_EQ(cache.find(test::random_prompt(9, V, 3)).cut, 0);
  ASSERT_TRUE(cache.take_oldest().cache);       // y goes
  EXPECT_EQ(cache.find(y).cut, 0);
  EXPECT_EQ(cache.find(x).cut, 49);
  // A kept sequence that extends an entry replaces it.
  std::vector<int32_t> longer = x_tokens;
  for (int32_t t : test::random_prompt(5, V, 4)) longer.push_back(t);
  cache.insert(kept(longer));
  EXPECT_EQ(cache.size(), 1u);
  cache.clear();
  EXPECT_EQ(engine->target->pools().blocks_in_use(), 0);
}

}  // namespace
}  // namespace dsv4
