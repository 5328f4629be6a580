// The model configuration (io/config.h): the golden tiny-a config, the real V4-Flash
// config, defaults, and validation errors that name their key.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// The DeepSeek-V4-Flash release config.json (the keys the engine reads).
json v4_flash_json() {
  json ratios = json::array({0, 0});
  for (int i = 0; i < 20; ++i) {
    ratios.push_back(4);
    ratios.push_back(128);
  }
  ratios.push_back(4);
  ratios.push_back(0);  // the MTP layer
  json j = json::parse(R"({
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
    "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1,
    "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024,
    "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
    "rope_theta": 10000, "compress_rope_theta": 160000,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                     "beta_fast": 32, "beta_slow": 1},
    "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "norm_topk_prob": true, "swiglu_limit": 10.0,
    "num_hash_layers": 3, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
    "vocab_size": 129280, "num_nextn_predict_layers": 1, "bos_token_id": 0, "eos_token_id": 1,
    "max_position_embeddings": 1048576, "expert_dtype": "fp4", "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
  })");
  j["compress_ratios"] = ratios;
  return j;
}

// Expects parse_config(j) to fail with a message containing every part.
void expect_config_error(const json& j, const std::vector<std::string>& parts) {
  try {
    parse_config(j, "test.json");
    FAIL() << "no error for " << j.dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

json with(json j, const std::string& key, const json& value) {
  j[key] = value;
  return j;
}

TEST(Config, TinyAParsesToExpectedValues) {
  const ModelConfig c = load_config(test::tiny_a_dir() / "config.json");
  EXPECT_EQ(c.vocab_size, 1024);
  EXPECT_EQ(c.hidden_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 128);
  EXPECT_EQ(c.o_groups, 2);
  EXPECT_EQ(c.o_lora_rank, 128);
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 0}));
  EXPECT_EQ(c.index_n_heads, 4);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 8);
  EXPECT_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.compress_rope_theta, 160000);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_EQ(c.rope_scaling.factor, 16);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_EQ(c.n_routed_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 128);
  EXPECT_EQ(c.scoring_func, ScoringFunc::SqrtSoftplus);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.num_hash_layers, 1);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_EQ(c.hc_eps, 1e-6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.expert_dtype, "fp4");
  EXPECT_EQ(c.weight_block_size, 128);
  EXPECT_EQ(c.num_layers_total(), 5);
  EXPECT_TRUE(c.is_hash_layer(0));
  EXPECT_FALSE(c.is_hash_layer(1));
  EXPECT_EQ(c.nope_head_dim(), 64);
}

TEST(Config, V4FlashParsesToExpectedValues) {
  const json j = v4_flash_json();
  ASSERT_EQ(j["compress_ratios"].size(), 44u);  // 43 layers + 1 MTP layer
  const ModelConfig c = parse_config(j);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_hidden_layers, 43);
  EXPECT_EQ(c.num_layers_total(), 44);
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.compress_ratio(0), 0);
  EXPECT_EQ(c.compress_ratio(1), 0);
  EXPECT_EQ(c.compress_ratio(2), 4);
  EXPECT_EQ(c.compress_ratio(3), 128);
  EXPECT_EQ(c.compress_ratio(41), 128);
  EXPECT_EQ(c.compress_ratio(42), 4);
  EXPECT_EQ(c.compress_ratio(43), 0);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.rope_theta, 10000);
  EXPECT_EQ(c.compress_rope_theta, 160000);
  EXPECT_TRUE(c.rope_scaling.enabled);
  EXPECT_EQ(c.rope_scaling.factor, 16);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32);
  EXPECT_EQ(c.rope_scaling.beta_slow, 1);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.scoring_func, ScoringFunc::SqrtSoftplus);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.num_hash_layers, 3);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_EQ(c.hc_eps, 1e-6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.num_nextn_predict_layers, 1);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.eos_token_id, 1);
}

TEST(Config, ToJsonRoundTrips) {
  for (const json& j : {v4_flash_json(), json::parse(R"({})")}) {
    const ModelConfig a = parse_config(j);
    const ModelConfig b = parse_config(a.to_json());
    EXPECT_EQ(a.to_json(), b.to_json());
  }
  const ModelConfig tiny = load_config(test::tiny_a_dir() / "config.json");
  EXPECT_EQ(parse_config(tiny.to_json()).to_json(), tiny.to_json());
}

TEST(Config, AbsentKeysTakeDefaults) {
  const ModelConfig d;
  const ModelConfig c = parse_config(json::object());
  EXPECT_EQ(c.to_json(), d.to_json());
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.scoring_func, ScoringFunc::SqrtSoftplus);
  EXPECT_FALSE(c.rope_scaling.enabled);
  EXPECT_EQ(c.expert_dtype, "");  // not stated (V4-Pro's config): the experts' tensors tell
  // Only the given keys change; null counts as absent.
  const ModelConfig e = parse_config(json{{"sliding_window", 8}, {"swiglu_limit", nullptr}});
  EXPECT_EQ(e.sliding_window, 8);
  EXPECT_EQ(e.swiglu_limit, d.swiglu_limit);
  // eos_token_id may be a list (HF); the first entry is the primary EOS.
  EXPECT_EQ(parse_config(json{{"eos_token_id", {1, 0}}}).eos_token_id, 1);
}

TEST(Config, ValidationErrorsNameTheKey) {
  const json v4 = v4_flash_json();
  json short_ratios = v4;
  short_ratios["compress_ratios"].erase(43);
  expect_config_error(short_ratios, {"compress_ratios", "43 entries", "44"});

  json mtp_ratio = v4;
  mtp_ratio["compress_ratios"][43] = 4;
  expect_config_error(mtp_ratio, {"compress_ratios", "entry 43", "MTP layer", "must be 0"});

  json bad_ratio = v4;
  bad_ratio["compress_ratios"][5] = 1;
  expect_config_error(bad_ratio, {"compress_ratios", "entry 5"});

  expect_config_error(with(v4, "hidden_size", 4000), {"hidden_size", "4000", "multiple of 128"});
  expect_config_error(with(v4, "q_lora_rank", 1000), {"q_lora_rank", "multiple of 128"});
  expect_config_error(with(v4, "moe_intermediate_size", 2000), {"moe_intermediate_size", "multiple of 128"});
  expect_config_error(with(v4, "o_lora_rank", 100), {"o_lora_rank", "multiple of 128"});
  expect_config_error(with(v4, "qk_rope_head_dim", 512), {"qk_rope_head_dim", "smaller than head_dim"});
  expect_config_error(with(v4, "qk_rope_head_dim", 600), {"qk_rope_head_dim"});
  expect_config_error(with(v4, "qk_rope_head_dim", 63), {"qk_rope_head_dim", "even"});
  expect_config_error(with(v4, "num_attention_heads", 60), {"num_attention_heads", "o_groups"});
  expect_config_error(with(v4, "o_groups", 0), {"o_groups", "positive"});
  expect_config_error(with(v4, "scoring_func", "relu"), {"scoring_func", "relu"});
  expect_config_error(with(v4, "num_experts_per_tok", 300), {"num_experts_per_tok", "n_routed_experts"});
  expect_config_error(with(v4, "num_hash_layers", 44), {"num_hash_layers"});
  expect_config_error(with(v4, "eos_token_id", 200000), {"eos_token_id", "vocabulary"});
  expect_config_error(with(v4, "index_head_dim", 96), {"index_head_dim", "power of two"});
  expect_config_error(with(v4, "expert_dtype", "int4"), {"expert_dtype", "int4"});
  expect_config_error(with(v4, "rms_norm_eps", 0), {"rms_norm_eps"});
  expect_config_error(with(v4, "rope_scaling", json{{"type", "linear"}}), {"rope_scaling.type", "linear"});
  json block = v4;
  block["quantization_config"]["weight_block_size"] = {64, 64};
  expect_config_error(block, {"weight_block_size"});

  // Wrong types.
  expect_config_error(with(v4, "hidden_size", "4096"), {"hidden_size", "must be an integer"});
  expect_config_error(with(v4, "hidden_size", 4096.5), {"hidden_size", "must be an integer"});
  expect_config_error(with(v4, "rope_theta", "big"), {"rope_theta", "wrong type"});
  expect_config_error(with(v4, "norm_topk_prob", "yes"), {"norm_topk_prob", "wrong type"});
  expect_config_error(with(v4, "compress_ratios", "0,4"), {"compress_ratios", "list of integers"});
  expect_config_error(with(v4, "compress_ratios", json::array({0, 1.5})), {"compress_ratios", "list of integers"});
  expect_config_error(with(v4, "scoring_func", 3), {"scoring_func", "wrong type"});
  expect_config_error(with(v4, "rope_scaling", 16), {"rope_scaling", "object"});
  expect_config_error(json::array(), {"not a JSON object"});
  // A float that is an integer is accepted for integer keys.
  EXPECT_EQ(parse_config(with(v4, "sliding_window", 64.0)).sliding_window, 64);
}

TEST(Config, LoadConfigNamesTheFile) {
  const auto dir = test::scratch_dir("config_file");
  try {
    load_config(dir / "missing.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos);
  }
  {
    std::ofstream(dir / "bad.json") << "{\"hidden_size\": ";
  }
  try {
    load_config(dir / "bad.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json: malformed JSON"), std::string::npos) << e.what();
  }
  {
    std::ofstream(dir / "invalid.json") << R"({"hidden_size": 100})";
  }
  try {
    load_config(dir / "invalid.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hidden_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4
