#include "checkpoint/presets.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4 {

using nlohmann::json;

ModelConfig v4_flash_config() {
  ModelConfig c;
  c.vocab_size = 129280;
  c.hidden_size = 4096;
  c.num_hidden_layers = 43;
  c.num_attention_heads = 64;
  c.head_dim = 512;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 1024;
  c.o_groups = 8;
  c.o_lora_rank = 1024;
  c.sliding_window = 128;
  c.compress_ratios = {0, 0};  // then CSA/HCA pairs, a last CSA layer, and the MTP layer
  for (int i = 0; i < 20; ++i) c.compress_ratios.insert(c.compress_ratios.end(), {4, 128});
  c.compress_ratios.insert(c.compress_ratios.end(), {4, 0});
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.rope_scaling = {true, 16.0, 65536, 32.0, 1.0};
  c.n_routed_experts = 256;
  c.num_experts_per_tok = 6;
  c.n_shared_experts = 1;
  c.moe_intermediate_size = 2048;
  c.scoring_func = ScoringFunc::SqrtSoftplus;
  c.routed_scaling_factor = 1.5;
  c.norm_topk_prob = true;
  c.swiglu_limit = 10.0;
  c.num_hash_layers = 3;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.rms_norm_eps = 1e-6;
  c.num_nextn_predict_layers = 1;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.max_position_embeddings = 1048576;  // 65536 x YaRN factor 16
  c.expert_dtype = "fp4";
  c.validate();
  return c;
}

// DeepSeek-V4-Pro: the V4-Flash computation at other sizes (shared/design: v4-pro), with no
// window-only layers — its first two layers have a ratio-128 compressor and are hash-routed —
// and, as published, no expert_dtype key (the experts' encoding comes from their tensors).
ModelConfig v4_pro_config() {
  ModelConfig c = v4_flash_config();
  c.hidden_size = 7168;
  c.num_hidden_layers = 61;
  c.num_attention_heads = 128;
  c.q_lora_rank = 1536;
  c.o_groups = 16;
  c.compress_ratios = {128, 128};  // then 29 CSA/HCA pairs, a last CSA layer, and the MTP layer
  for (int i = 0; i < 29; ++i) c.compress_ratios.insert(c.compress_ratios.end(), {4, 128});
  c.compress_ratios.insert(c.compress_ratios.end(), {4, 0});
  c.index_topk = 1024;
  c.n_routed_experts = 384;
  c.moe_intermediate_size = 3072;
  c.routed_scaling_factor = 2.5;
  c.expert_dtype.clear();
  c.validate();
  return c;
}

// Pro's shape at tiny sizes: the layer pattern [128, 128, 4, 128] with three hash-routed layers
// (two HCA, one CSA), twice tiny-a's heads in twice its output groups, 1.5x its hidden width
// (384: not a power of two, as 7168 is not), experts and expert width, twice its index top-k,
// Pro's routed scaling, no expert_dtype.
ModelConfig tiny_pro_config() {
  ModelConfig c = tiny_config();
  c.hidden_size = 384;
  c.num_attention_heads = 8;
  c.o_groups = 4;
  c.q_lora_rank = 256;
  c.compress_ratios = {128, 128, 4, 128, 0};
  c.num_hash_layers = 3;
  c.index_topk = 16;
  c.n_routed_experts = 12;
  c.moe_intermediate_size = 256;
  c.routed_scaling_factor = 2.5;
  c.expert_dtype.clear();
  c.max_position_embeddings = 1024;  // sequences long enough for the ratio-128 layers' entries
  c.validate();
  return c;
}

ModelConfig tiny_config() {
  ModelConfig c = v4_flash_config();  // same formats, router, YaRN and hc settings
  c.vocab_size = 1024;
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 128;
  c.o_groups = 2;
  c.o_lora_rank = 128;
  c.sliding_window = 32;
  c.compress_ratios = {0, 4, 128, 4, 0};
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_topk = 8;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 128;
  c.num_hash_layers = 1;
  c.max_position_embeddings = 512;
  c.validate();
  return c;
}

ModelConfig mirror_tiny_config() {
  ModelConfig c = tiny_config();
  c.max_position_embeddings = 4096;  // generations long enough to cross many windows and blocks
  c.validate();
  return c;
}

ModelConfig mirror_v4_flash_config() {
  ModelConfig c = v4_flash_config();
  c.num_hidden_layers = 3;
  c.compress_ratios = {0, 4, 128, 0};  // window, CSA, HCA (repeated by --layers), the MTP layer
  c.validate();
  return c;
}

namespace {

// The DSpark drafter of DeepSeek-V4-Flash-0731 on a target configuration: `stages` ratio-0 entries
// after the target's layers (num_nextn_predict_layers stays 1, as 0731's config says), the last
// three target layers tapped.
ModelConfig with_dspark(ModelConfig c, int64_t stages, int64_t markov_rank, int64_t noise_token_id) {
  c.compress_ratios.resize(size_t(c.num_hidden_layers));
  c.compress_ratios.insert(c.compress_ratios.end(), size_t(stages), 0);
  c.dspark_block_size = 5;
  c.dspark_noise_token_id = noise_token_id;
  c.dspark_markov_rank = markov_rank;
  c.dspark_target_layer_ids.clear();
  for (int64_t l = std::max<int64_t>(0, c.num_hidden_layers - 3); l < c.num_hidden_layers; ++l)
    c.dspark_target_layer_ids.push_back(l);
  c.validate();
  return c;
}

}  // namespace

ModelConfig tiny_dspark_config() { return with_dspark(tiny_config(), 3, 64, 1000); }

ModelConfig mirror_dspark_tiny_config() { return with_dspark(mirror_tiny_config(), 3, 64, 1000); }

ModelConfig mirror_dspark_v4_flash_config() { return with_dspark(mirror_v4_flash_config(), 3, 256, 128799); }

const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      {"tiny", "the golden tiny-a configuration (4 layers [0,4,128,4] + MTP), random weights",
       WeightKind::Random, tiny_config(), 4},
      {"v4-flash", "DeepSeek-V4-Flash dimensions (default --layers 2; ~3.4 GB per layer), random weights",
       WeightKind::Random, v4_flash_config(), 2},
      {"aligned", "tiny dimensions; target predicts f(token), MTP the token after next",
       WeightKind::Aligned, tiny_config(), 4},
      {"aligned-v4-flash", "V4-Flash dimensions (default --layers 2), aligned weights",
       WeightKind::Aligned, v4_flash_config(), 2},
      {"mirror", "tiny dimensions; context-dependent target, MTP mirroring layer 0: partial acceptance",
       WeightKind::Mirror, mirror_tiny_config(), 4},
      {"mirror-v4-flash", "V4-Flash dimensions (default --layers 3: window, CSA, HCA), mirror weights",
       WeightKind::Mirror, mirror_v4_flash_config(), 3},
      {"v4-pro", "DeepSeek-V4-Pro dimensions (default --layers 2: its two hash-routed ratio-128 layers; ~6 GB per "
       "layer; shrink with --set, e.g. n_routed_experts=16), random weights",
       WeightKind::Random, v4_pro_config(), 2},
      {"tiny-pro", "V4-Pro's shape at tiny sizes (4 layers [128,128,4,128], 3 hash-routed, 8 heads in 4 output groups, "
       "hidden 384, 12 experts, top-k 16) + MTP, random weights",
       WeightKind::Random, tiny_pro_config(), 4},
      {"tiny-dspark", "the golden tiny-dspark-a configuration (4 layers [0,4,128,4] + a 3-stage DSpark drafter, "
       "V4-Flash-0731's layout), random weights",
       WeightKind::Random, tiny_dspark_config(), 4},
      {"mirror-dspark", "tiny dimensions; mirror's target with a weaker layer-0 attention (context 2.75) + a DSpark "
       "drafter whose Markov head follows the target's successor: partial acceptance (mirror_dspark_weights.h)",
       WeightKind::MirrorDSpark, mirror_dspark_tiny_config(), 4},
      {"mirror-dspark-v4-flash", "V4-Flash-0731 dimensions (default --layers 3: window, CSA, HCA), mirror-dspark "
       "weights",
       WeightKind::MirrorDSpark, mirror_dspark_v4_flash_config(), 3},
  };
  return kPresets;
}

const Preset& find_preset(const std::string& name) {
  std::string known;
  for (const Preset& p : presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw Error(cat("make-checkpoint: unknown preset '", name, "'; known presets: ", known));
}

std::pair<std::string, std::string> parse_set_option(const std::string& text) {
  const size_t eq = text.find('=');
  DSV4_CHECK(eq != std::string::npos && eq > 0, "make-checkpoint: --set expects key=json_value, got '",
             text, "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::vector<int64_t> parse_ratio_list(const std::string& text) {
  std::vector<int64_t> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    DSV4_CHECK(!item.empty() && used == item.size(), "make-checkpoint: --ratios entry '", item,
               "' is not an integer (expected a list like 0,4,128)");
    out.push_back(v);
    begin = end + 1;
  }
  return out;
}

namespace {

// The JSON node of a dotted key ("rope_scaling.factor"); throws if the key does not exist.
json& config_node(json& j, const std::string& key) {
  json* node = &j;
  size_t begin = 0;
  for (;;) {
    const size_t dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    DSV4_CHECK(node->is_object() && node->contains(part), "make-checkpoint: --set: key '", key,
               "' is not a configuration key");
    node = &(*node)[part];
    if (dot == std::string::npos) return *node;
    begin = dot + 1;
  }
}

json parse_value(const std::string& key, const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    // A bare word (scoring_func=sigmoid) is a string; anything else must be valid JSON.
    DSV4_CHECK(!text.empty() && text.find_first_of("[]{}\",:") == std::string::npos,
               "make-checkpoint: --set ", key, ": '", text, "' is not a JSON value");
    return json(text);
  }
}

}  // namespace

ModelConfig build_config(const Preset& preset, const ConfigChanges& changes) {
  const ModelConfig& base = preset.config;
  const std::vector<int64_t> pattern(base.compress_ratios.begin(),
                                     base.compress_ratios.begin() + base.num_hidden_layers);
  json j = base.to_json();

  bool set_layers = false, set_ratios = false, set_hash = false, set_taps = false;
  for (const auto& [key, text] : changes.set) {
    config_node(j, key) = parse_value(key, text);
    set_layers |= key == "num_hidden_layers";
    set_ratios |= key == "compress_ratios";
    set_hash |= key == "num_hash_layers";
    set_taps |= key == "dspark_target_layer_ids";
  }
  DSV4_CHECK(!(changes.ratios && set_ratios), "make-checkpoint: give either --ratios or --set compress_ratios");
  DSV4_CHECK(!(changes.ratios && changes.layers && int64_t(changes.ratios->size()) != *changes.layers),
             "make-checkpoint: --layers ", *changes.layers, " disagrees with --ratios (", changes.ratios->size(),
             " entries)");
  if (changes.layers) DSV4_CHECK(*changes.layers > 0, "make-checkpoint: --layers must be positive, got ", *changes.layers);
  DSV4_CHECK(!changes.ratios || !changes.ratios->empty(), "make-checkpoint: --ratios needs at least one entry");

  // The layer count and the target layers' kinds; the drafter's layers always get ratio 0: the MTP
  // layers, or a DSpark drafter's stages (as many as the preset has: 0731 keeps
  // num_nextn_predict_layers = 1 beside its 3 stages).
  const json& mtp_node = j["num_nextn_predict_layers"];
  const json* block_node = j.contains("dspark_block_size") ? &j["dspark_block_size"] : nullptr;
  const bool dspark = block_node && block_node->is_number_integer() && block_node->get<int64_t>() > 0;
  const int64_t mtp_layers = dspark && base.has_dspark() ? base.num_drafter_layers()
                             : mtp_node.is_number_integer() ? std::max<int64_t>(0, mtp_node.get<int64_t>())
                                                            : 0;
  std::optional<int64_t> layers;
  if (changes.ratios) layers = int64_t(changes.ratios->size());
  else if (changes.layers) layers = *changes.layers;
  else if (set_layers) {
    if (j["num_hidden_layers"].is_number_integer()) layers = j["num_hidden_layers"].get<int64_t>();
  } else if (set_ratios) {
    if (j["compress_ratios"].is_array()) layers = int64_t(j["compress_ratios"].size()) - mtp_layers;
  } else {
    layers = preset.default_layers;
  }
  if (layers) {
    j["num_hidden_layers"] = *layers;
    if (!set_ratios || changes.ratios) {
      std::vector<int64_t> ratios;
      for (int64_t l = 0; l < *layers; ++l)
        ratios.push_back(changes.ratios ? (*changes.ratios)[size_t(l)] : pattern[size_t(l) % pattern.size()]);
      ratios.insert(ratios.end(), size_t(mtp_layers), 0);
      j["compress_ratios"] = ratios;
    }
    if (!set_hash) j["num_hash_layers"] = std::min(base.num_hash_layers, std::max<int64_t>(*layers, 0));
    // The drafter taps the last target layers (as many as the preset taps, at most N) unless set.
    if (dspark && !set_taps) {
      const int64_t taps = std::min<int64_t>(int64_t(base.dspark_target_layer_ids.size()), *layers);
      std::vector<int64_t> ids;
      for (int64_t l = std::max<int64_t>(0, *layers - taps); l < *layers; ++l) ids.push_back(l);
      j["dspark_target_layer_ids"] = ids;
    }
  }
  return parse_config(j, "make-checkpoint config");
}

}  // namespace dsv4
