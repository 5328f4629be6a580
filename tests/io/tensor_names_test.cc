// The two naming families (model/tensor_names.h): Hugging Face transformers names translate to
// the release's, as the published mapping table says, and back.
#include <gtest/gtest.h>

#include <set>

#include "io/config.h"
#include "model/tensor_names.h"
#include "model/weights.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// Pairs from the transformers conversion mapping and the BF16 / llm-compressor files (not derived
// from the code under test).
const std::vector<std::pair<std::string, std::string>> kHfToRelease = {
    {"model.embed_tokens.weight", "embed.weight"},
    {"lm_head.weight", "head.weight"},
    {"model.norm.weight", "norm.weight"},
    {"model.hc_head.hc_fn", "hc_head_fn"},
    {"model.layers.7.attn_hc.fn", "layers.7.hc_attn_fn"},
    {"model.layers.7.ffn_hc.base", "layers.7.hc_ffn_base"},
    {"model.layers.7.input_layernorm.weight", "layers.7.attn_norm.weight"},
    {"model.layers.7.post_attention_layernorm.weight", "layers.7.ffn_norm.weight"},
    {"model.layers.7.self_attn.q_a_proj.weight", "layers.7.attn.wq_a.weight"},
    {"model.layers.7.self_attn.q_a_norm.weight", "layers.7.attn.q_norm.weight"},
    {"model.layers.7.self_attn.q_b_proj.weight", "layers.7.attn.wq_b.weight"},
    {"model.layers.7.self_attn.kv_proj.weight", "layers.7.attn.wkv.weight"},
    {"model.layers.7.self_attn.kv_norm.weight", "layers.7.attn.kv_norm.weight"},
    {"model.layers.7.self_attn.o_a_proj.weight", "layers.7.attn.wo_a.weight"},
    {"model.layers.7.self_attn.o_b_proj.weight_scale_inv", "layers.7.attn.wo_b.weight_scale_inv"},
    {"model.layers.7.self_attn.sinks", "layers.7.attn.attn_sink"},
    {"model.layers.7.self_attn.compressor.kv_proj.weight", "layers.7.attn.compressor.wkv.weight"},
    {"model.layers.7.self_attn.compressor.gate_proj.weight", "layers.7.attn.compressor.wgate.weight"},
    {"model.layers.7.self_attn.compressor.kv_norm.weight", "layers.7.attn.compressor.norm.weight"},
    {"model.layers.7.self_attn.compressor.position_bias", "layers.7.attn.compressor.ape"},
    {"model.layers.7.self_attn.compressor.indexer.q_b_proj.weight", "layers.7.attn.indexer.wq_b.weight"},
    {"model.layers.7.self_attn.compressor.indexer.weights_proj.weight", "layers.7.attn.indexer.weights_proj.weight"},
    {"model.layers.7.self_attn.compressor.indexer.scorer.weights_proj.weight",
     "layers.7.attn.indexer.weights_proj.weight"},
    {"model.layers.7.self_attn.compressor.indexer.kv_proj.weight", "layers.7.attn.indexer.compressor.wkv.weight"},
    {"model.layers.7.self_attn.compressor.indexer.position_bias", "layers.7.attn.indexer.compressor.ape"},
    {"model.layers.7.mlp.gate.weight", "layers.7.ffn.gate.weight"},
    {"model.layers.7.mlp.gate.e_score_correction_bias", "layers.7.ffn.gate.bias"},
    {"layers.7.ffn.gate.e_score_correction_bias", "layers.7.ffn.gate.bias"},  // canada-quant's release names
    {"model.layers.7.mlp.gate.tid2eid", "layers.7.ffn.gate.tid2eid"},
    {"model.layers.7.mlp.shared_experts.gate_proj.weight", "layers.7.ffn.shared_experts.w1.weight"},
    {"model.layers.7.mlp.shared_experts.up_proj.weight", "layers.7.ffn.shared_experts.w3.weight"},
    {"model.layers.7.mlp.shared_experts.down_proj.weight", "layers.7.ffn.shared_experts.w2.weight"},
    {"model.layers.7.mlp.experts.255.gate_proj.weight_packed", "layers.7.ffn.experts.255.w1.weight_packed"},
    {"model.layers.7.mlp.experts.0.down_proj.weight", "layers.7.ffn.experts.0.w2.weight"},
    {"mtp.0.self_attn.q_a_proj.weight", "mtp.0.attn.wq_a.weight"},
    {"mtp.0.e_proj.weight", "mtp.0.e_proj.weight"},
};

TEST(TensorNames, HfNamesTranslateToReleaseNames) {
  for (const auto& [hf, release] : kHfToRelease) EXPECT_EQ(release_tensor_name(hf), release) << hf;
}

// Every tensor of a complete checkpoint (tiny-a's table, with MTP): release names are fixed
// points, and the HF name of each translates back to it, with no two sharing an HF name.
TEST(TensorNames, EveryTableNameRoundTrips) {
  const ModelConfig c = load_config(test::tiny_a_dir() / "config.json");
  std::set<std::string> hf_names;
  size_t translated = 0;
  for (const TensorSpec& s : expected_tensors(c, true)) {
    EXPECT_EQ(release_tensor_name(s.name), s.name);
    const std::string hf = hf_tensor_name(s.name);
    EXPECT_EQ(release_tensor_name(hf), s.name) << hf;
    EXPECT_TRUE(hf_names.insert(hf).second) << "two tensors named " << hf;
    translated += hf != s.name;
  }
  EXPECT_GT(translated, hf_names.size() / 2);  // the HF names do differ
}

TEST(TensorNames, MtpAliases) {
  EXPECT_TRUE(is_mtp_alias("mtp.0.emb.tok_emb.weight"));
  EXPECT_TRUE(is_mtp_alias("mtp.0.head.weight"));
  EXPECT_FALSE(is_mtp_alias("mtp.0.norm.weight"));
  EXPECT_FALSE(is_mtp_alias("head.weight"));
}

}  // namespace
}  // namespace dsv4
