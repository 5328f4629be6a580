// The Hugging Face transformers dialect of the DeepSeek-V4 config.json.
//
// transformers' DeepseekV4Config spells some of the release's keys differently:
//   layer_types (one per target layer: sliding_attention, compressed_sparse_attention,
//     heavily_compressed_attention) + compress_rates (ratio per compressed kind)  ->  compress_ratios
//     (which also lists the MTP layers, ratio 0: the HF list does not)
//   mlp_layer_types (hash_moe, moe)                                              ->  num_hash_layers
//   partial_rotary_factor (rotary share of head_dim)                             ->  qk_rope_head_dim
//   rope_parameters {main: {rope_theta}, compress: {rope_theta, rope_type yarn, factor, ...}}
//                                                                                ->  rope_theta,
//                                                                   compress_rope_theta, rope_scaling
// The release key wins where both are present. The exact forms of compress_rates (an object by
// kind, or a list per layer) and rope_parameters (nested by kind, or flat) are not pinned down by
// a published file; both forms are read.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "io/config.h"

namespace dsv4 {

// Applies the HF keys of `j` that have no release counterpart in it (num_hidden_layers,
// num_nextn_predict_layers and head_dim already read into c). Throws Error naming the key.
void read_hf_dialect(const nlohmann::json& j, const std::string& source, ModelConfig& c);

// config.json in the HF dialect: to_json() with the release-only keys replaced by their HF forms.
// Throws when the layer pattern has no HF spelling (more than one ratio per compressed kind).
nlohmann::json to_hf_config_json(const ModelConfig& c);

}  // namespace dsv4
