// weight_views(): the list a backend's prepare() receives must hold every weight tensor of the
// checkpoint once (scales travel with their weight's view), and walking bound weights must not
// unbind them.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "model/model_files.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

TEST(WeightViews, EveryWeightTensorOnceAndBindingsKept) {
  auto files = ModelFiles::open(test::tiny_a_dir());
  ModelWeights& w = files->weights;
  ASSERT_FALSE(w.mtp.empty()) << "tiny-a has an MTP module";
  const auto* indexer_wkv = w.layers.back().attn.indexer ? w.layers.back().attn.indexer->compressor.wkv.data : nullptr;
  const uint8_t* first_expert = w.layers[0].ffn.experts[0].w1.data;

  const auto views = weight_views(w, files->config);

  std::set<std::string> expected;
  for (const TensorSpec& s : expected_tensors(files->config, /*with_mtp=*/true))
    if (!s.name.ends_with(".scale")) expected.insert(s.name);
  std::set<std::string> seen;
  for (const WeightView* v : views) {
    ASSERT_TRUE(v->present());
    EXPECT_TRUE(seen.insert(std::string(v->name())).second) << "twice: " << v->name();
  }
  EXPECT_EQ(seen, expected);
  // The walk re-visits optional parts and vectors without resetting them.
  EXPECT_EQ(w.layers[0].ffn.experts[0].w1.data, first_expert);
  if (indexer_wkv) {
    EXPECT_EQ(w.layers.back().attn.indexer->compressor.wkv.data, indexer_wkv);
  }
  for (const WeightView* v : views) EXPECT_TRUE(v->present()) << v->name();
}

}  // namespace
}  // namespace dsv4
