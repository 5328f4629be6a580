// The model configuration: the Hugging Face config.json of DeepSeek-V4 as one plain struct.
//
// Absent keys take the reference implementation's defaults; validate() checks the
// combinations the engine relies on and names the offending key.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/scoring_func.h"

namespace dsv4 {

struct YarnScaling {
  bool enabled = false;                       // rope_scaling.type == "yarn"
  double factor = 40.0;                       // rope_scaling.factor
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct ModelConfig {
  int64_t vocab_size = 129280;
  int64_t hidden_size = 4096;                 // D
  int64_t num_hidden_layers = 7;              // target layers (MTP layers are extra)
  int64_t num_attention_heads = 64;           // H query heads; one shared KV head
  int64_t head_dim = 512;                     // d
  int64_t qk_rope_head_dim = 64;              // r: the last r dims of a head carry RoPE
  int64_t q_lora_rank = 1024;
  int64_t o_groups = 8;
  int64_t o_lora_rank = 1024;
  int64_t sliding_window = 128;
  std::vector<int64_t> compress_ratios = {0, 0, 4, 128, 4, 128, 4, 0};  // layers + MTP layers
  int64_t index_n_heads = 64;
  int64_t index_head_dim = 128;
  int64_t index_topk = 512;
  double rope_theta = 10000.0;                // ratio-0 layers and the MTP layer, no YaRN
  double compress_rope_theta = 40000.0;       // compressed layers, with YaRN
  YarnScaling rope_scaling;
  int64_t n_routed_experts = 8;
  int64_t num_experts_per_tok = 2;
  int64_t n_shared_experts = 1;
  int64_t moe_intermediate_size = 4096;
  ScoringFunc scoring_func = ScoringFunc::SqrtSoftplus;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  double swiglu_limit = 0.0;                  // 0 = no clamp
  int64_t num_hash_layers = 0;                // the first layers route by token id
  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-6;
  int64_t num_nextn_predict_layers = 1;       // MTP modules (mtp.N.*)
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  int64_t max_position_embeddings = 4096;
  // "fp4": routed experts are packed e2m1; "fp8": FP8 tiles; "": not stated (V4-Pro's config),
  // the experts' tensors tell (the weights are bound by what they hold; tables of expected
  // tensors take FP4, the released encoding).
  std::string expert_dtype;
  int64_t weight_block_size = 128;            // quantization_config.weight_block_size
  // compressed-tensors: the group_size of its 4-bit integer weights (quantization_config.
  // config_groups.*.weights with num_bits 4, type int); 0 where the config states none.
  int64_t int4_group_size = 0;
  // DSpark (DeepSeek-V4-Flash-0731): the mtp.N.* stages are a block drafter, not the MTP module.
  // Their number is len(compress_ratios) - num_hidden_layers (num_nextn_predict_layers still says 1).
  int64_t dspark_block_size = 0;              // B rows drafted per pass; 0 = no DSpark drafter
  int64_t dspark_noise_token_id = 0;          // fills block rows 1..B-1
  std::vector<int64_t> dspark_target_layer_ids;  // target blocks whose output streams are tapped
  int64_t dspark_markov_rank = 0;             // rank of the Markov head (W1 [V, r], W2 [V, r])

  // Derived.
  bool has_dspark() const { return dspark_block_size > 0; }
  // The drafter layers after the target's: DSpark's stages, else the MTP modules.
  int64_t num_drafter_layers() const {
    return has_dspark() ? int64_t(compress_ratios.size()) - num_hidden_layers : num_nextn_predict_layers;
  }
  int64_t num_layers_total() const { return num_hidden_layers + num_drafter_layers(); }
  int64_t compress_ratio(int64_t layer) const { return compress_ratios.at(size_t(layer)); }
  bool is_hash_layer(int64_t layer) const { return layer < num_hash_layers; }
  int64_t nope_head_dim() const { return head_dim - qk_rope_head_dim; }

  void validate() const;  // throws Error naming the key
  nlohmann::json to_json() const;
};

ModelConfig parse_config(const nlohmann::json& j, const std::string& source = "config.json");
ModelConfig load_config(const std::filesystem::path& config_json);

const char* scoring_func_name(ScoringFunc f);

}  // namespace dsv4
