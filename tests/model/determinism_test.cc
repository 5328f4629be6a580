// Batch invariance and exact rollback of the target model: the property that makes
// speculative greedy decoding token-identical to plain greedy decoding.
//
// - prefill of T tokens, T single-token decodes, and extends of assorted sizes give
//   bit-identical logits and hidden streams;
// - several sequences decoded in one pass give the same bits as each alone;
// - truncate(L) after processing junk tokens (a rejected draft) restores the state exactly:
//   the continuation is bit-identical, for rollbacks of 1..8 tokens across window and
//   compression-block boundaries.
// On tiny-a and on generated tiny configurations with other windows, heads, experts and orders.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "model/model_files.h"
#include "model/transformer.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

struct RunRows {
  std::vector<float> logits;  // [T, V]: the logits after each token
  std::vector<float> hidden;  // [T, hc·D]
};

// Feeds `tokens` in calls of the given sizes (all logits), collecting every row.
RunRows run_in_chunks(Transformer& model, SequenceCache& seq, const std::vector<int32_t>& tokens,
                  const std::vector<int64_t>& sizes) {
  RunRows run;
  Transformer::Output out;
  size_t at = 0;
  for (size_t i = 0; at < tokens.size(); ++i) {
    const size_t n = std::min<size_t>(size_t(sizes[i % sizes.size()]), tokens.size() - at);
    Transformer::Request r{&seq, std::span<const int32_t>(tokens.data() + at, n), true};
    model.forward(std::span(&r, 1), out);
    run.logits.insert(run.logits.end(), out.logits.begin(), out.logits.end());
    const std::vector<float> rows = out.hidden_host();
    run.hidden.insert(run.hidden.end(), rows.begin(), rows.end());
    at += n;
  }
  return run;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(rng() % uint64_t(vocab));
  return t;
}

struct Case {
  std::string name;
  std::vector<std::string> set;   // config overrides for make-checkpoint (empty: the golden tiny-a)
  std::vector<int64_t> ratios;
  int64_t tokens = 160;
  std::string preset = "tiny";    // make-checkpoint's preset
};

std::filesystem::path checkpoint_for(const Case& c) {
  if (c.preset == "tiny" && c.set.empty() && c.ratios.empty()) return test::tiny_a_dir();
  return test::generated_checkpoint("determinism-" + c.name, c.preset, 7, c.set, c.ratios);
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DeterminismTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeterminismTest, CallSplitsAndBatchingGiveIdenticalBits) {
  const Case& c = GetParam();
  auto files = ModelFiles::open(checkpoint_for(c));
  auto backend = test::make_test_backend();
  Backend& be = *backend;
  Transformer model(files->config, files->weights, be, {16});
  const auto tokens = random_tokens(c.tokens, files->config.vocab_size, 11);

  auto s0 = model.new_sequence();
  const RunRows prefill = run_in_chunks(model, *s0, tokens, {c.tokens});
  auto s1 = model.new_sequence();
  const RunRows decode = run_in_chunks(model, *s1, tokens, {1});
  auto s2 = model.new_sequence();
  const RunRows mixed = run_in_chunks(model, *s2, tokens, {5, 1, 3, 9, 2, 8, 4});
  EXPECT_TRUE(bit_identical(prefill.logits, decode.logits)) << "prefill vs decode logits";
  EXPECT_TRUE(bit_identical(prefill.hidden, decode.hidden)) << "prefill vs decode hidden";
  EXPECT_TRUE(bit_identical(prefill.logits, mixed.logits)) << "prefill vs extend logits";
  EXPECT_TRUE(bit_identical(prefill.hidden, mixed.hidden)) << "prefill vs extend hidden";

  // Two sequences in one pass (different lengths) give each one's bits.
  const auto other = random_tokens(c.tokens / 2, files->config.vocab_size, 12);
  auto a = model.new_sequence(), b = model.new_sequence();
  Transformer::Output out;
  RunRows batched_a, batched_b;
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<Transformer::Request> reqs{{a.get(), std::span<const int32_t>(&tokens[t], 1), true}};
    if (t < other.size()) reqs.push_back({b.get(), std::span<const int32_t>(&other[t], 1), true});
    model.forward(reqs, out);
    const int64_t V = out.vocab, W = out.hidden_width;
    batched_a.logits.insert(batched_a.logits.end(), out.logits_row(0), out.logits_row(0) + V);
    const std::vector<float> rows = out.hidden_host();
    batched_a.hidden.insert(batched_a.hidden.end(), rows.begin() + out.rows_begin[0] * W,
                            rows.begin() + (out.rows_begin[0] + 1) * W);
    if (reqs.size() > 1) batched_b.logits.insert(batched_b.logits.end(), out.logits_row(1), out.logits_row(1) + V);
  }
  auto alone_b_seq = model.new_sequence();
  const RunRows alone_b = run_in_chunks(model, *alone_b_seq, other, {1});
  EXPECT_TRUE(bit_identical(prefill.logits, batched_a.logits)) << "batched sequence A";
  EXPECT_TRUE(bit_identical(prefill.hidden, batched_a.hidden)) << "batched sequence A hidden";
  EXPECT_TRUE(bit_identical(alone_b.logits, batched_b.logits)) << "batched sequence B";
}

TEST_P(DeterminismTest, TruncateRestoresTheStateExactly) {
  const Case& c = GetParam();
  auto files = ModelFiles::open(checkpoint_for(c));
  const ModelConfig& cfg = files->config;
  auto backend = test::make_test_backend();
  Backend& be = *backend;
  Transformer model(cfg, files->weights, be, {16});
  const auto tokens = random_tokens(c.tokens, cfg.vocab_size, 21);
  auto ref_seq = model.new_sequence();
  const RunRows reference = run_in_chunks(model, *ref_seq, tokens, {1});
  const int64_t V = cfg.vocab_size, W = cfg.hc_mult * cfg.hidden_size;

  // Rollback points around window and block boundaries, rollback lengths 1..8.
  std::vector<int64_t> points;
  for (int64_t boundary : {cfg.sliding_window, int64_t(4), int64_t(12), int64_t(128), int64_t(2) * cfg.sliding_window})
    for (int64_t d : {-1, 2})
      if (boundary + d > 0 && boundary + d + 10 < c.tokens) points.push_back(boundary + d);
  for (int64_t p = 7; p + 10 < c.tokens; p += 23) points.push_back(p);
  std::sort(points.begin(), points.end());
  auto seq = model.new_sequence();
  Transformer::Output out;
  int64_t length = 0, rollback = 1, checked = 0;
  for (int64_t point : points) {
    if (point <= length) continue;
    std::vector<int32_t> upto(tokens.begin() + length, tokens.begin() + point);
    run_in_chunks(model, *seq, upto, {3});
    length = point;
    // A "rejected draft": junk tokens, then roll back.
    const auto junk = random_tokens(rollback, V, 100 + uint64_t(point));
    Transformer::Request r{seq.get(), junk, true};
    model.forward(std::span(&r, 1), out);
    seq->truncate(length);
    // Continue with the true tokens: must equal the reference bit for bit.
    const int64_t n = std::min<int64_t>(6, c.tokens - length);
    Transformer::Request cont{seq.get(), std::span<const int32_t>(tokens.data() + length, size_t(n)), true};
    model.forward(std::span(&cont, 1), out);
    ASSERT_EQ(0, std::memcmp(out.logits.data(), reference.logits.data() + length * V, size_t(n * V) * 4))
        << "logits after rolling back " << rollback << " tokens at length " << length;
    ASSERT_EQ(0, std::memcmp(out.hidden_host().data(), reference.hidden.data() + length * W, size_t(n * W) * 4))
        << "hidden after rolling back " << rollback << " tokens at length " << length;
    length += n;
    ++checked;
    rollback = 1 + (checked * 3) % 8;  // 1, 4, 7, 2, 5, 8, 3, 6, ...
  }
  EXPECT_GE(checked, 4);
  std::printf("checked %lld rollbacks\n", (long long)checked);
}

// Rows whose final streams nobody reads (Request::streams = false: no drafting) skip the last
// block's attention output and MoE, and give the same logits and logit-row streams bit for bit.
TEST_P(DeterminismTest, UnreadStreamsSkipTheLastBlocksOutputsWithIdenticalBits) {
  const Case& c = GetParam();
  auto files = ModelFiles::open(checkpoint_for(c));
  auto backend = test::make_test_backend();
  Transformer model(files->config, files->weights, *backend, {16});
  const auto tokens = random_tokens(c.tokens, files->config.vocab_size, 31);
  const int64_t P = c.tokens * 2 / 3, half = P / 2, W = files->config.hc_mult * files->config.hidden_size;

  struct Seen {
    std::vector<float> logits, logit_streams, other_streams;
    std::vector<int64_t> hidden_rows;
  };
  auto run = [&](bool streams) {
    Seen seen;
    auto seq = model.new_sequence(), other = model.new_sequence();
    Transformer::Output out;
    auto record = [&] {
      seen.logits.insert(seen.logits.end(), out.logits.begin(), out.logits.end());
      seen.hidden_rows.push_back(out.hidden.dim(0));
      const std::vector<float> h = out.hidden_host();
      if (!out.logits.empty())  // the streams of the first request's last logit row
        seen.logit_streams.insert(seen.logit_streams.end(), h.end() - W, h.end());
    };
    auto step = [&](int64_t at, int64_t n, bool all_logits, bool no_logits, bool prompt) {
      Transformer::Request r{seq.get(), std::span<const int32_t>(tokens).subspan(size_t(at), size_t(n)), all_logits,
                             no_logits, prompt, streams};
      model.forward(std::span(&r, 1), out);
      record();
    };
    step(0, half, false, /*no_logits=*/true, /*prompt=*/true);  // a prompt's first chunk
    step(half, P - half, false, false, true);                   // its last chunk
    for (int64_t t = P; t < P + 3; ++t) step(t, 1, false, false, false);
    step(P + 3, 4, /*all_logits=*/true, false, false);          // a verification pass
    // A prompt chunk batched with another sequence's verification (whose streams are read).
    std::vector<Transformer::Request> batch{
        {other.get(), std::span<const int32_t>(tokens).first(size_t(P)), false, false, true, streams},
        {seq.get(), std::span<const int32_t>(tokens).subspan(size_t(P + 7), 3), true, false, false, true}};
    model.forward(batch, out);
    seen.logits.insert(seen.logits.end(), out.logits.begin(), out.logits.end());
    seen.hidden_rows.push_back(out.hidden.dim(0));
    seen.hidden_rows.push_back(out.rows_begin[1]);
    const std::vector<float> h = out.hidden_host();
    seen.other_streams.assign(h.begin() + out.rows_begin[1] * W, h.begin() + (out.rows_begin[1] + 3) * W);
    return seen;
  };
  const Seen full = run(true), lean = run(false);
  EXPECT_TRUE(bit_identical(full.logits, lean.logits)) << "logits";
  EXPECT_TRUE(bit_identical(full.logit_streams, lean.logit_streams)) << "streams of the logit rows";
  EXPECT_TRUE(bit_identical(full.other_streams, lean.other_streams)) << "streams of the batched verification";
  // The rows that left the last block: all of them, or only those whose logits or streams are read.
  EXPECT_EQ(full.hidden_rows, (std::vector<int64_t>{half, P - half, 1, 1, 1, 4, P + 3, P}));
  EXPECT_EQ(lean.hidden_rows, (std::vector<int64_t>{0, 1, 1, 1, 1, 4, 1 + 3, 1}));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, DeterminismTest,
    ::testing::Values(Case{"tiny_a", {}, {}, 300},
                      Case{"window8_heads8", {"sliding_window=8", "num_attention_heads=8", "o_groups=4"}, {4, 128, 0}, 150},
                      Case{"experts16_top4", {"n_routed_experts=16", "num_experts_per_tok=4", "num_hash_layers=0",
                                              "index_topk=3", "sliding_window=12"}, {128, 4, 4}, 140},
                      Case{"ratio0_only_hc2", {"hc_mult=2", "sliding_window=5"}, {0, 0}, 100},
                      // V4-Pro's pattern: ratio-128 hash-routed first layers, no window-only layer
                      Case{"tiny_pro", {}, {}, 300, "tiny-pro"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dsv4
