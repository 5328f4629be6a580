#include "io/config.h"

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/config_hf.h"

namespace dsv4 {

using nlohmann::json;

const char* scoring_func_name(ScoringFunc f) {
  switch (f) {
    case ScoringFunc::SqrtSoftplus: return "sqrtsoftplus";
    case ScoringFunc::Sigmoid: return "sigmoid";
    case ScoringFunc::Softmax: return "softmax";
  }
  return "?";
}

namespace {

class Reader {
 public:
  Reader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  template <typename T>
  void get(const char* key, T& out) const {
    if (!j_.contains(key) || j_[key].is_null()) return;
    try {
      out = j_[key].get<T>();
    } catch (const json::exception&) {
      throw Error(cat(source_, ": key '", key, "' has the wrong type: ", j_[key].dump()));
    }
  }
  void get_int(const char* key, int64_t& out) const {
    if (!j_.contains(key) || j_[key].is_null()) return;
    const json& v = j_[key];
    if (v.is_number_integer()) { out = v.get<int64_t>(); return; }
    if (v.is_number_float() && std::fabs(v.get<double>()) < 0x1p62 &&  // (a cast out of range is undefined)
        v.get<double>() == double(int64_t(v.get<double>()))) {
      out = int64_t(v.get<double>());
      return;
    }
    // eos_token_id may be a list in HF configs; the first entry is the primary EOS.
    if (v.is_array() && !v.empty() && v[0].is_number_integer()) { out = v[0].get<int64_t>(); return; }
    throw Error(cat(source_, ": key '", key, "' must be an integer, got ", v.dump()));
  }
  const json& raw() const { return j_; }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
};

}  // namespace

ModelConfig parse_config(const json& j, const std::string& source) {
  DSV4_CHECK(j.is_object(), source, ": config is not a JSON object");
  Reader r(j, source);
  ModelConfig c;
  r.get_int("vocab_size", c.vocab_size);
  r.get_int("hidden_size", c.hidden_size);
  r.get_int("num_hidden_layers", c.num_hidden_layers);
  r.get_int("num_attention_heads", c.num_attention_heads);
  r.get_int("head_dim", c.head_dim);
  r.get_int("qk_rope_head_dim", c.qk_rope_head_dim);
  r.get_int("q_lora_rank", c.q_lora_rank);
  r.get_int("o_groups", c.o_groups);
  r.get_int("o_lora_rank", c.o_lora_rank);
  r.get_int("sliding_window", c.sliding_window);
  if (j.contains("compress_ratios")) {
    const json& v = j["compress_ratios"];
    DSV4_CHECK(v.is_array(), source, ": key 'compress_ratios' must be a list of integers");
    c.compress_ratios.clear();
    for (auto& e : v) {
      DSV4_CHECK(e.is_number_integer(), source, ": key 'compress_ratios' must be a list of integers, got ", e.dump());
      c.compress_ratios.push_back(e.get<int64_t>());
    }
  }
  r.get_int("index_n_heads", c.index_n_heads);
  r.get_int("index_head_dim", c.index_head_dim);
  r.get_int("index_topk", c.index_topk);
  r.get("rope_theta", c.rope_theta);
  r.get("compress_rope_theta", c.compress_rope_theta);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& rs = j["rope_scaling"];
    DSV4_CHECK(rs.is_object(), source, ": key 'rope_scaling' must be an object");
    Reader rr(rs, source + " rope_scaling");
    std::string type;
    rr.get("type", type);
    if (type.empty()) rr.get("rope_type", type);
    DSV4_CHECK(type == "yarn", source, ": key 'rope_scaling.type' is '", type,
               "'; only \"yarn\" is supported");
    c.rope_scaling.enabled = true;
    rr.get("factor", c.rope_scaling.factor);
    rr.get_int("original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings);
    rr.get("beta_fast", c.rope_scaling.beta_fast);
    rr.get("beta_slow", c.rope_scaling.beta_slow);
  }
  r.get_int("n_routed_experts", c.n_routed_experts);
  r.get_int("num_experts_per_tok", c.num_experts_per_tok);
  r.get_int("n_shared_experts", c.n_shared_experts);
  r.get_int("moe_intermediate_size", c.moe_intermediate_size);
  if (j.contains("scoring_func")) {
    std::string f;
    r.get("scoring_func", f);
    if (f == "sqrtsoftplus") c.scoring_func = ScoringFunc::SqrtSoftplus;
    else if (f == "sigmoid") c.scoring_func = ScoringFunc::Sigmoid;
    else if (f == "softmax") c.scoring_func = ScoringFunc::Softmax;
    else throw Error(cat(source, ": key 'scoring_func' is '", f, "'; expected sqrtsoftplus, sigmoid or softmax"));
  }
  r.get("routed_scaling_factor", c.routed_scaling_factor);
  r.get("norm_topk_prob", c.norm_topk_prob);
  r.get("swiglu_limit", c.swiglu_limit);
  r.get_int("num_hash_layers", c.num_hash_layers);
  r.get_int("hc_mult", c.hc_mult);
  r.get_int("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  r.get("hc_eps", c.hc_eps);
  r.get("rms_norm_eps", c.rms_norm_eps);
  r.get_int("num_nextn_predict_layers", c.num_nextn_predict_layers);
  r.get_int("bos_token_id", c.bos_token_id);
  r.get_int("eos_token_id", c.eos_token_id);
  r.get_int("max_position_embeddings", c.max_position_embeddings);
  r.get("expert_dtype", c.expert_dtype);  // (V4-Pro's config states none: the experts' tensors tell)
  r.get_int("dspark_block_size", c.dspark_block_size);
  r.get_int("dspark_noise_token_id", c.dspark_noise_token_id);
  r.get("dspark_target_layer_ids", c.dspark_target_layer_ids);
  r.get_int("dspark_markov_rank", c.dspark_markov_rank);
  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    const json& q = j["quantization_config"];
    if (q.contains("weight_block_size")) {
      const json& b = q["weight_block_size"];
      DSV4_CHECK(b.is_array() && b.size() == 2 && b[0].is_number_integer() && b[1] == b[0],
                 source, ": key 'quantization_config.weight_block_size' must be [n, n], got ", b.dump());
      c.weight_block_size = b[0].get<int64_t>();
    }
    if (q.contains("fmt"))
      DSV4_CHECK(q["fmt"] == "e4m3", source, ": key 'quantization_config.fmt' must be \"e4m3\", got ", q["fmt"].dump());
    if (q.contains("scale_fmt"))
      DSV4_CHECK(q["scale_fmt"] == "ue8m0", source, ": key 'quantization_config.scale_fmt' must be \"ue8m0\", got ",
                 q["scale_fmt"].dump());
    if (q.contains("config_groups") && q["config_groups"].is_object())
      for (const auto& [name, group] : q["config_groups"].items()) {
        const json* w = group.is_object() && group.contains("weights") ? &group["weights"] : nullptr;
        if (!w || !w->is_object() || w->value("num_bits", json()) != 4 || w->value("type", json()) != "int") continue;
        const json g = w->value("group_size", json());
        DSV4_CHECK(g.is_number_integer() && g.get<int64_t>() > 0, source, ": key 'quantization_config.config_groups.",
                   name, ".weights.group_size' must be a positive integer for 4-bit integer weights, got ", g.dump());
        c.int4_group_size = g.get<int64_t>();
      }
  }
  read_hf_dialect(j, source, c);
  c.validate();
  return c;
}

void ModelConfig::validate() const {
  auto positive = [](const char* key, int64_t v) {
    DSV4_CHECK(v > 0, "config: key '", key, "' must be positive, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("head_dim", head_dim);
  positive("q_lora_rank", q_lora_rank);
  positive("o_groups", o_groups);
  positive("o_lora_rank", o_lora_rank);
  positive("sliding_window", sliding_window);
  positive("n_routed_experts", n_routed_experts);
  positive("num_experts_per_tok", num_experts_per_tok);
  positive("moe_intermediate_size", moe_intermediate_size);
  positive("hc_mult", hc_mult);
  positive("hc_sinkhorn_iters", hc_sinkhorn_iters);
  positive("max_position_embeddings", max_position_embeddings);
  DSV4_CHECK(num_nextn_predict_layers >= 0, "config: key 'num_nextn_predict_layers' must be >= 0");
  DSV4_CHECK(weight_block_size == 128, "config: key 'quantization_config.weight_block_size' must be [128, 128], got ",
             weight_block_size);
  if (has_dspark()) {
    // DeepSeek-V4-Flash-0731 keeps num_nextn_predict_layers = 1 beside three DSpark stages: the
    // stages are the compress_ratios entries after the target's layers.
    DSV4_CHECK(int64_t(compress_ratios.size()) > num_hidden_layers, "config: key 'compress_ratios' has ",
               compress_ratios.size(), " entries; a DSpark drafter (dspark_block_size ", dspark_block_size,
               ") needs num_hidden_layers (", num_hidden_layers, ") + one entry per stage");
    DSV4_CHECK(dspark_block_size >= 2, "config: key 'dspark_block_size' must be at least 2 (the anchor and a "
               "draft), got ", dspark_block_size);
    DSV4_CHECK(dspark_noise_token_id >= 0 && dspark_noise_token_id < vocab_size, "config: key "
               "'dspark_noise_token_id' (", dspark_noise_token_id, ") is outside the vocabulary (", vocab_size, ")");
    DSV4_CHECK(dspark_markov_rank > 0, "config: key 'dspark_markov_rank' must be positive, got ", dspark_markov_rank);
    DSV4_CHECK(!dspark_target_layer_ids.empty(), "config: key 'dspark_target_layer_ids' is empty: the DSpark "
               "drafter needs the target layers it reads");
    for (size_t i = 0; i < dspark_target_layer_ids.size(); ++i) {
      const int64_t id = dspark_target_layer_ids[i];
      DSV4_CHECK(id >= 0 && id < num_hidden_layers, "config: key 'dspark_target_layer_ids' entry ", i, " is ", id,
                 "; expected a target layer in [0, ", num_hidden_layers, ")");
      DSV4_CHECK(i == 0 || id > dspark_target_layer_ids[i - 1], "config: key 'dspark_target_layer_ids' must be "
                 "strictly increasing, got ", id, " after ", dspark_target_layer_ids[i - 1]);
    }
  } else {
    DSV4_CHECK(int64_t(compress_ratios.size()) == num_hidden_layers + num_nextn_predict_layers,
               "config: key 'compress_ratios' has ", compress_ratios.size(),
               " entries; expected num_hidden_layers + num_nextn_predict_layers = ",
               num_hidden_layers + num_nextn_predict_layers);
  }
  const char* drafter = has_dspark() ? "a DSpark stage" : "an MTP layer";
  for (size_t i = 0; i < compress_ratios.size(); ++i) {
    int64_t r = compress_ratios[i];
    DSV4_CHECK(r == 0 || r >= 2, "config: key 'compress_ratios' entry ", i, " is ", r,
               "; expected 0 (window only) or a ratio >= 2 (4 = CSA with indexer, 128 = HCA)");
    if (int64_t(i) >= num_hidden_layers)
      DSV4_CHECK(r == 0, "config: key 'compress_ratios' entry ", i, " belongs to ", drafter, " and must be 0, got ", r);
  }
  auto multiple = [](const char* key, int64_t v, int64_t of) {
    DSV4_CHECK(v % of == 0, "config: key '", key, "' = ", v, " is not a multiple of ", of,
               " (the quantization block)");
  };
  multiple("hidden_size", hidden_size, 128);
  multiple("q_lora_rank", q_lora_rank, 128);
  multiple("moe_intermediate_size", moe_intermediate_size, 128);
  multiple("o_lora_rank", o_lora_rank, 128);
  DSV4_CHECK(qk_rope_head_dim > 0 && qk_rope_head_dim % 2 == 0, "config: key 'qk_rope_head_dim' must be a positive even number, got ",
             qk_rope_head_dim);
  DSV4_CHECK(qk_rope_head_dim < head_dim, "config: key 'qk_rope_head_dim' (", qk_rope_head_dim,
             ") must be smaller than head_dim (", head_dim, ")");
  DSV4_CHECK((head_dim - qk_rope_head_dim) % 64 == 0, "config: key 'head_dim' minus qk_rope_head_dim (",
             head_dim - qk_rope_head_dim, ") must be a multiple of 64 (the KV's FP8 block)");
  multiple("head_dim", head_dim, 128);
  DSV4_CHECK(num_attention_heads % o_groups == 0, "config: key 'num_attention_heads' (", num_attention_heads,
             ") must be divisible by o_groups (", o_groups, ")");
  multiple("num_attention_heads * head_dim / o_groups", num_attention_heads * head_dim / o_groups, 128);
  DSV4_CHECK(num_experts_per_tok <= n_routed_experts, "config: key 'num_experts_per_tok' (", num_experts_per_tok,
             ") exceeds n_routed_experts (", n_routed_experts, ")");
  DSV4_CHECK(n_shared_experts == 1, "config: key 'n_shared_experts' must be 1, got ", n_shared_experts);
  DSV4_CHECK(num_hash_layers >= 0 && num_hash_layers <= num_hidden_layers, "config: key 'num_hash_layers' (",
             num_hash_layers, ") must be between 0 and num_hidden_layers");
  DSV4_CHECK(expert_dtype == "fp4" || expert_dtype == "fp8" || expert_dtype.empty(),
             "config: key 'expert_dtype' must be \"fp4\" or \"fp8\", got \"", expert_dtype, "\"");
  bool any_indexer = false;
  for (int64_t i = 0; i < num_hidden_layers; ++i) any_indexer |= compress_ratios[size_t(i)] == 4;
  if (any_indexer) {
    positive("index_n_heads", index_n_heads);
    positive("index_topk", index_topk);
    DSV4_CHECK(index_head_dim > qk_rope_head_dim && (index_head_dim & (index_head_dim - 1)) == 0,
               "config: key 'index_head_dim' must be a power of two larger than qk_rope_head_dim, got ",
               index_head_dim);
    multiple("index_n_heads * index_head_dim", index_n_heads * index_head_dim, 128);
  }
  DSV4_CHECK(rope_theta > 0, "config: key 'rope_theta' must be positive");
  DSV4_CHECK(compress_rope_theta > 0, "config: key 'compress_rope_theta' must be positive");
  if (rope_scaling.enabled) {
    DSV4_CHECK(rope_scaling.factor >= 1, "config: key 'rope_scaling.factor' must be >= 1");
    DSV4_CHECK(rope_scaling.original_max_position_embeddings > 0,
               "config: key 'rope_scaling.original_max_position_embeddings' must be positive");
  }
  DSV4_CHECK(rms_norm_eps > 0, "config: key 'rms_norm_eps' must be positive");
  DSV4_CHECK(bos_token_id >= 0 && bos_token_id < vocab_size, "config: key 'bos_token_id' (", bos_token_id,
             ") is outside the vocabulary");
  DSV4_CHECK(eos_token_id >= 0 && eos_token_id < vocab_size, "config: key 'eos_token_id' (", eos_token_id,
             ") is outside the vocabulary");
}

json ModelConfig::to_json() const {
  json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = "deepseek_v4";
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = 1;
  j["head_dim"] = head_dim;
  j["qk_rope_head_dim"] = qk_rope_head_dim;
  j["q_lora_rank"] = q_lora_rank;
  j["o_groups"] = o_groups;
  j["o_lora_rank"] = o_lora_rank;
  j["sliding_window"] = sliding_window;
  j["compress_ratios"] = compress_ratios;
  j["index_n_heads"] = index_n_heads;
  j["index_head_dim"] = index_head_dim;
  j["index_topk"] = index_topk;
  j["rope_theta"] = rope_theta;
  j["compress_rope_theta"] = compress_rope_theta;
  if (rope_scaling.enabled)
    j["rope_scaling"] = {{"type", "yarn"},
                         {"factor", rope_scaling.factor},
                         {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings},
                         {"beta_fast", rope_scaling.beta_fast},
                         {"beta_slow", rope_scaling.beta_slow}};
  j["n_routed_experts"] = n_routed_experts;
  j["num_experts_per_tok"] = num_experts_per_tok;
  j["n_shared_experts"] = n_shared_experts;
  j["moe_intermediate_size"] = moe_intermediate_size;
  j["scoring_func"] = scoring_func_name(scoring_func);
  j["routed_scaling_factor"] = routed_scaling_factor;
  j["norm_topk_prob"] = norm_topk_prob;
  j["swiglu_limit"] = swiglu_limit;
  j["num_hash_layers"] = num_hash_layers;
  j["hc_mult"] = hc_mult;
  j["hc_sinkhorn_iters"] = hc_sinkhorn_iters;
  j["hc_eps"] = hc_eps;
  j["rms_norm_eps"] = rms_norm_eps;
  j["num_nextn_predict_layers"] = num_nextn_predict_layers;
  j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_token_id;
  j["max_position_embeddings"] = max_position_embeddings;
  if (!expert_dtype.empty()) j["expert_dtype"] = expert_dtype;  // (V4-Pro's config has none)
  if (has_dspark()) {
    j["dspark_block_size"] = dspark_block_size;
    j["dspark_noise_token_id"] = dspark_noise_token_id;
    j["dspark_target_layer_ids"] = dspark_target_layer_ids;
    j["dspark_markov_rank"] = dspark_markov_rank;
  }
  j["hidden_act"] = "silu";
  j["torch_dtype"] = "bfloat16";
  j["topk_method"] = "noaux_tc";
  j["tie_word_embeddings"] = false;
  j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"},
                              {"quant_method", "fp8"}, {"scale_fmt", "ue8m0"},
                              {"weight_block_size", {weight_block_size, weight_block_size}}};
  return j;
}

ModelConfig load_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  DSV4_CHECK(in.good(), path.string(), ": cannot read");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(cat(path.string(), ": malformed JSON: ", e.what()));
  }
  try {
    return parse_config(j, path.string());
  } catch (const Error& e) {
    throw Error(cat(path.string(), ": ", e.what()));
  }
}

}  // namespace dsv4
