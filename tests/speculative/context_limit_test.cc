// Memory you can predict: the cache's documented size (layer_cache_footprint, which `dsv4
// inspect` reports and --max-context checks) against closed-form V4-Flash figures and against
// the row blocks a sequence really holds; and --max-context's refusals.
#include <gtest/gtest.h>

#include "cache/sequence_cache.h"
#include "checkpoint/presets.h"
#include "speculative/context_limit.h"
#include "engine/engine.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

TEST(CacheFootprint, V4FlashBytesPerTokenPerLayerKind) {
  const ModelConfig c = v4_flash_config();
  // CSA: a bf16 entry of head_dim 512 and an indexer key of 128 per 4 positions.
  EXPECT_DOUBLE_EQ(layer_cache_footprint(cache_geometry_for(c, 4), 16).bytes_per_token, (1024.0 + 256.0) / 4);
  EXPECT_DOUBLE_EQ(layer_cache_footprint(cache_geometry_for(c, 128), 16).bytes_per_token, 1024.0 / 128);
  EXPECT_DOUBLE_EQ(layer_cache_footprint(cache_geometry_for(c, 0), 16).bytes_per_token, 0.0);
  // Window-only: (window + rollback) raw rows in at most two partly used blocks more, nothing that grows.
  EXPECT_EQ(layer_cache_footprint(cache_geometry_for(c, 0), 16).fixed_bytes, (128 + 16 + 2 * 64) * 1024);
}

TEST(CacheFootprint, MatchesTheBlocksASequenceHolds) {
  auto engine = Engine::open(test::tiny_a_dir(), {test::test_backend(), false, 0, 16});
  Transformer& model = *engine->target;
  const ModelConfig& c = engine->config();
  const CacheFootprint f = model_cache_footprint(c, 16);
  // Target layers only (this engine has no MTP module loaded).
  CacheFootprint target;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) target += layer_cache_footprint(cache_geometry_for(c, c.compress_ratio(l)), 16);
  ASSERT_GT(target.bytes_per_token, 0.0);
  ASSERT_GE(f.bytes_per_token, target.bytes_per_token);
  auto seq = model.new_sequence();
  const std::vector<int32_t> tokens = test::random_prompt(480, c.vocab_size, 5);
  auto held_after = [&](int64_t upto) {
    for (int64_t at = seq->length(); at < upto; at += 96) {
      const int64_t n = std::min<int64_t>(96, upto - at);
      Transformer::Request r{seq.get(), std::span<const int32_t>(tokens).subspan(size_t(at), size_t(n)), false, true};
      Transformer::Output out;
      model.forward(std::span(&r, 1), out);
    }
    return model.pools().bytes_held();
  };
  const int64_t at240 = held_after(240), at480 = held_after(480);
  // Never more than the documented bound; growth as documented, within one block per growing table.
  EXPECT_LE(at240, target.at(240));
  EXPECT_LE(at480, target.at(480));
  int64_t block_slack = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerCacheGeometry g = cache_geometry_for(c, c.compress_ratio(l));
    if (g.ratio > 0) block_slack += 64 * 2 * g.head_dim;
    if (g.index_head_dim > 0) block_slack += 64 * 2 * g.index_head_dim;
  }
  EXPECT_NEAR(double(at480 - at240), target.bytes_per_token * 240, double(block_slack));
}

TEST(ContextLimit, RefusesWhatCannotFitAndCapsGeneration) {
  const ModelConfig c = v4_flash_config();
  const CacheFootprint f = model_cache_footprint(c, 16);
  // Enough memory: accepted; the limit caps generation and rejects a prompt that fills it.
  const ContextLimit l = ContextLimit::check(c, 4096, 1, 512, int64_t(1) << 40);
  EXPECT_EQ(l.tokens, 4096);
  GenerateOptions o;
  o.max_new_tokens = 1000;
  l.apply(4000, o, "test");
  EXPECT_EQ(o.max_new_tokens, 96);
  EXPECT_THROW(l.apply(4096, o, "test"), Error);
  // Beyond the model's positions, or more cache than memory: refused at start, with the numbers.
  EXPECT_THROW(ContextLimit::check(c, c.max_position_embeddings + 1, 1, 512, int64_t(1) << 40), Error);
  const int64_t need = 8 * f.at(c.max_position_embeddings) + 512 * kPrefillBytesPerRow;
  EXPECT_NO_THROW(ContextLimit::check(c, 0, 8, 512, need));
  try {
    ContextLimit::check(c, 0, 8, 512, need - 1);
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MiB are available"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4
