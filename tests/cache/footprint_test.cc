// The cache one sequence holds (model_cache_footprint): the MTP module's window layer, or a DSpark
// drafter's rings, one per stage, whatever num_nextn_predict_layers says beside them.
#include <gtest/gtest.h>

#include "cache/sequence_cache.h"
#include "io/config.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// The target's layers alone.
CacheFootprint target_only(ModelConfig c, int64_t retain) {
  c.num_nextn_predict_layers = 0;
  c.dspark_block_size = 0;
  c.compress_ratios.resize(size_t(c.num_hidden_layers));
  return model_cache_footprint(c, retain);
}

TEST(CacheFootprint, MtpAddsOneWindowLayerPerModule) {
  const ModelConfig c = load_config(test::tiny_a_dir() / "config.json");
  const CacheFootprint all = model_cache_footprint(c, 16), target = target_only(c, 16);
  EXPECT_EQ(all.bytes_per_token, target.bytes_per_token);
  // window 32 + rollback 16 rows, two partly used blocks of 64, bf16 rows of head_dim 128
  EXPECT_EQ(all.fixed_bytes - target.fixed_bytes, (32 + 16 + 2 * 64) * 128 * 2);
}

TEST(CacheFootprint, DSparkHoldsOneRingPerStage) {
  ModelConfig c = load_config(test::data_path("tiny-dspark-a") / "config.json");
  ASSERT_EQ(c.num_drafter_layers(), 3);
  ASSERT_EQ(c.num_nextn_predict_layers, 1);
  const CacheFootprint all = model_cache_footprint(c, 16), target = target_only(c, 16);
  EXPECT_EQ(all.bytes_per_token, target.bytes_per_token);  // rings do not grow with the context
  // Per stage: the window's 32 rows and a block of 5 (no rollback: only verified rows are written),
  // two partly used blocks of 64; bf16 rows of head_dim 128.
  const int64_t ring = (32 + 5 + 2 * 64) * 128 * 2;
  EXPECT_EQ(all.fixed_bytes - target.fixed_bytes, 3 * ring);
  // The stage count comes from compress_ratios, not from num_nextn_predict_layers.
  c.num_nextn_predict_layers = 2;
  EXPECT_EQ(model_cache_footprint(c, 16).fixed_bytes - target.fixed_bytes, 3 * ring);
  EXPECT_EQ(model_cache_footprint(c, 0).fixed_bytes - target_only(c, 0).fixed_bytes, 3 * ring);
}

}  // namespace
}  // namespace dsv4
