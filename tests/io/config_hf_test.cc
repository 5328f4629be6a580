// The Hugging Face dialect of config.json (io/config_hf.h): a config written the way
// transformers' DeepseekV4Config spells it parses to the release config's values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config.h"
#include "io/config_hf.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// V4-Flash in the HF dialect, written out by hand from the release config (not by to_hf_config_json).
json v4_flash_hf_json() {
  json types = json::array({"sliding_attention", "sliding_attention"});
  for (int i = 0; i < 20; ++i) {
    types.push_back("compressed_sparse_attention");
    types.push_back("heavily_compressed_attention");
  }
  types.push_back("compressed_sparse_attention");
  json mlp = json::array();
  for (int i = 0; i < 43; ++i) mlp.push_back(i < 3 ? "hash_moe" : "moe");
  json j = json::parse(R"({
    "model_type": "deepseek_v4", "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
    "head_dim": 512, "partial_rotary_factor": 0.125, "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024,
    "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000},
                        "compress": {"rope_type": "yarn", "rope_theta": 160000, "factor": 16,
                                     "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1}},
    "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "norm_topk_prob": true, "swiglu_limit": 10.0,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
    "vocab_size": 129280, "num_nextn_predict_layers": 1, "bos_token_id": 0, "eos_token_id": 1,
    "max_position_embeddings": 1048576
  })");
  j["layer_types"] = types;
  j["mlp_layer_types"] = mlp;
  return j;
}

TEST(ConfigHfDialect, V4FlashParsesToTheReleaseValues) {
  const ModelConfig c = parse_config(v4_flash_hf_json(), "hf.json");
  ASSERT_EQ(c.compress_ratios.size(), 44u);  // 43 layers + the MTP layer the HF list leaves out
  EXPECT_EQ(c.compress_ratios[0], 0);
  EXPECT_EQ(c.compress_ratios[1], 0);
  EXPECT_EQ(c.compress_ratios[2], 4);
  EXPECT_EQ(c.compress_ratios[3], 128);
  EXPECT_EQ(c.compress_ratios[42], 4);
  EXPECT_EQ(c.compress_ratios[43], 0);
  EXPECT_EQ(c.num_hash_layers, 3);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.compress_rope_theta, 160000.0);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_EQ(c.rope_scaling.factor, 16.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 65536);
}

TEST(ConfigHfDialect, OtherFormsAndPrecedence) {
  json j = v4_flash_hf_json();
  // compress_rates as a list per layer; rope_parameters flat (the main one only).
  json rates = json::array();
  for (auto& t : j["layer_types"]) rates.push_back(t == "sliding_attention" ? 0 : t == "compressed_sparse_attention" ? 4 : 128);
  j["compress_rates"] = rates;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000}};
  ModelConfig c = parse_config(j, "hf.json");
  EXPECT_EQ(c.compress_ratios[3], 128);
  EXPECT_EQ(c.rope_theta, 20000.0);
  EXPECT_FALSE(c.rope_scaling.enabled);
  // A release key wins over its HF form.
  j["qk_rope_head_dim"] = 64;
  j["partial_rotary_factor"] = 0.25;  // (would be 128)
  j["num_hash_layers"] = 1;
  c = parse_config(j, "hf.json");
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.num_hash_layers, 1);
}

TEST(ConfigHfDialect, ToHfJsonRoundTrips) {
  const ModelConfig tiny = load_config(test::tiny_a_dir() / "config.json");
  const json hf = to_hf_config_json(tiny);
  EXPECT_FALSE(hf.contains("compress_ratios"));
  EXPECT_FALSE(hf.contains("qk_rope_head_dim"));
  EXPECT_FALSE(hf.contains("num_hash_layers"));
  EXPECT_FALSE(hf.contains("rope_scaling"));
  EXPECT_EQ(hf["layer_types"].size(), size_t(tiny.num_hidden_layers));
  EXPECT_EQ(parse_config(hf, "hf.json").to_json(), tiny.to_json());
  // Two heavily compressed layers with different ratios: one rate per layer (found by fuzzing: the
  // by-kind form cannot say it).
  ModelConfig mixed = tiny;
  mixed.compress_ratios[3] = 64;
  const json mixed_hf = to_hf_config_json(mixed);
  EXPECT_TRUE(mixed_hf["compress_rates"].is_array());
  EXPECT_EQ(parse_config(mixed_hf, "hf.json").to_json(), mixed.to_json());
}

TEST(ConfigHfDialect, ErrorsNameTheKey) {
  auto expect_error = [](const json& j, const std::vector<std::string>& parts) {
    try {
      parse_config(j, "hf.json");
      FAIL() << "no error";
    } catch (const Error& e) {
      for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  json j = v4_flash_hf_json();
  j["compress_rates"]["compressed_sparse_attention"] = 8;  // ratio 4 is what makes a layer CSA
  expect_error(j, {"layer 2 is compressed_sparse_attention with compression rate 8", "expected 4"});
  j = v4_flash_hf_json();
  j["layer_types"][5] = "full_attention";
  expect_error(j, {"layer_types", "entry 5", "full_attention"});
  j = v4_flash_hf_json();
  j["layer_types"].erase(0);
  expect_error(j, {"layer_types", "42 entries", "43"});
  j = v4_flash_hf_json();
  j["mlp_layer_types"][5] = "hash_moe";
  expect_error(j, {"mlp_layer_types", "entry 5", "hash_moe after a moe"});
  j = v4_flash_hf_json();
  j["partial_rotary_factor"] = 0.1;
  expect_error(j, {"partial_rotary_factor", "not a whole number"});
  j = v4_flash_hf_json();
  j["rope_parameters"]["compress"]["rope_type"] = "linear";
  expect_error(j, {"rope_parameters.compress.rope_type", "linear"});
}

}  // namespace
}  // namespace dsv4
