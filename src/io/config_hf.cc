#include "io/config_hf.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4 {

using nlohmann::json;

namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

int64_t int_of(const json& v, const std::string& source, const std::string& key) {
  DSV4_CHECK(v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()) &&
                                        std::fabs(v.get<double>()) < 0x1p62),  // (a cast out of range is undefined)
             source, ": key '", key, "' must be an integer, got ", v.dump());
  return v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
}

double number_of(const json& v, const std::string& source, const std::string& key) {
  DSV4_CHECK(v.is_number(), source, ": key '", key, "' must be a number, got ", v.dump());
  return v.get<double>();
}

void read_layer_types(const json& j, const std::string& source, ModelConfig& c) {
  const json& types = j["layer_types"];
  DSV4_CHECK(types.is_array(), source, ": key 'layer_types' must be a list of strings");
  DSV4_CHECK(int64_t(types.size()) == c.num_hidden_layers, source, ": key 'layer_types' has ", types.size(),
             " entries; expected num_hidden_layers = ", c.num_hidden_layers);
  const json rates = j.contains("compress_rates") ? j["compress_rates"] : json::object();
  DSV4_CHECK(rates.is_object() || (rates.is_array() && rates.size() == types.size()), source,
             ": key 'compress_rates' must be an object by layer kind or a list with one entry per layer, got ",
             rates.dump());
  std::vector<int64_t> ratios;
  for (size_t i = 0; i < types.size(); ++i) {
    DSV4_CHECK(types[i].is_string(), source, ": key 'layer_types' entry ", i, " is not a string: ", types[i].dump());
    const std::string kind = types[i].get<std::string>();
    int64_t ratio = 0;
    if (kind == kSliding) ratio = 0;
    else if (kind == kCsa || kind == kHca) {
      ratio = kind == kCsa ? 4 : 128;
      if (rates.is_array()) ratio = int_of(rates[i], source, cat("compress_rates[", i, "]"));
      else if (rates.contains(kind)) ratio = int_of(rates[kind], source, "compress_rates." + kind);
      // The kind is what the ratio means to the model (4: compressed sparse, with the indexer): a
      // rate that says otherwise would silently run another kind of attention.
      DSV4_CHECK((kind == kCsa) == (ratio == 4) && ratio > 0, source, ": layer ", i, " is ", kind,
                 " with compression rate ", ratio, "; expected ",
                 kind == kCsa ? "4 (the indexed, compressed sparse attention)" : "a rate above 0 other than 4");
    } else {
      throw Error(cat(source, ": key 'layer_types' entry ", i, " is '", kind, "'; expected ", kSliding, ", ", kCsa,
                      " or ", kHca));
    }
    ratios.push_back(ratio);
  }
  for (int64_t m = 0; m < c.num_nextn_predict_layers; ++m) ratios.push_back(0);  // MTP layers: window only
  c.compress_ratios = std::move(ratios);
}

void read_mlp_layer_types(const json& types, const std::string& source, ModelConfig& c) {
  DSV4_CHECK(types.is_array(), source, ": key 'mlp_layer_types' must be a list of strings");
  int64_t hash = 0;
  bool seen_moe = false;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string kind = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
    if (kind == "hash_moe") {
      DSV4_CHECK(!seen_moe, source, ": key 'mlp_layer_types' entry ", i,
                 " is hash_moe after a moe layer; hash routing must come first");
      ++hash;
    } else if (kind == "moe") {
      seen_moe = true;
    } else {
      throw Error(cat(source, ": key 'mlp_layer_types' entry ", i, " is '", kind, "'; expected hash_moe or moe"));
    }
  }
  c.num_hash_layers = hash;
}

void read_rope_parameters(const json& p, const std::string& source, bool has_theta, ModelConfig& c) {
  DSV4_CHECK(p.is_object(), source, ": key 'rope_parameters' must be an object");
  const json base = p.contains("main") ? p["main"] : p;
  if (!has_theta && base.contains("rope_theta")) c.rope_theta = number_of(base["rope_theta"], source, "rope_parameters.main.rope_theta");
  if (!p.contains("compress")) return;
  const json& k = p["compress"];
  DSV4_CHECK(k.is_object(), source, ": key 'rope_parameters.compress' must be an object");
  if (k.contains("rope_theta")) c.compress_rope_theta = number_of(k["rope_theta"], source, "rope_parameters.compress.rope_theta");
  const std::string type = k.value("rope_type", k.value("type", std::string("default")));
  if (type == "default") return;
  DSV4_CHECK(type == "yarn", source, ": key 'rope_parameters.compress.rope_type' is '", type,
             "'; only \"yarn\" or \"default\" is supported");
  YarnScaling& y = c.rope_scaling;
  y.enabled = true;
  if (k.contains("factor")) y.factor = number_of(k["factor"], source, "rope_parameters.compress.factor");
  if (k.contains("original_max_position_embeddings"))
    y.original_max_position_embeddings =
        int_of(k["original_max_position_embeddings"], source, "rope_parameters.compress.original_max_position_embeddings");
  if (k.contains("beta_fast")) y.beta_fast = number_of(k["beta_fast"], source, "rope_parameters.compress.beta_fast");
  if (k.contains("beta_slow")) y.beta_slow = number_of(k["beta_slow"], source, "rope_parameters.compress.beta_slow");
}

}  // namespace

void read_hf_dialect(const json& j, const std::string& source, ModelConfig& c) {
  auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (!has("compress_ratios") && has("layer_types")) read_layer_types(j, source, c);
  if (!has("num_hash_layers") && has("mlp_layer_types")) read_mlp_layer_types(j["mlp_layer_types"], source, c);
  if (!has("qk_rope_head_dim") && has("partial_rotary_factor")) {
    const double rotary = number_of(j["partial_rotary_factor"], source, "partial_rotary_factor") * double(c.head_dim);
    DSV4_CHECK(rotary == std::round(rotary), source, ": key 'partial_rotary_factor' times head_dim (", c.head_dim,
               ") is ", rotary, ", not a whole number of dimensions");
    c.qk_rope_head_dim = int64_t(std::round(rotary));
  }
  if (!has("rope_scaling") && has("rope_parameters")) read_rope_parameters(j["rope_parameters"], source, has("rope_theta"), c);
}

json to_hf_config_json(const ModelConfig& c) {
  json j = c.to_json();
  for (const char* key : {"compress_ratios", "num_hash_layers", "qk_rope_head_dim", "rope_scaling", "rope_theta",
                          "compress_rope_theta"})
    j.erase(key);
  // A DSpark drafter's stage count lives only in compress_ratios (its entries after the target's
  // layers; num_nextn_predict_layers says 1): kept, as 0731's own config.json has it.
  if (c.has_dspark()) j["compress_ratios"] = c.compress_ratios;
  json types = json::array(), mlp = json::array(), per_layer = json::array();
  json rates = json::object();
  bool one_rate_per_kind = true;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t r = c.compress_ratio(l);
    const char* kind = r == 0 ? kSliding : r == 4 ? kCsa : kHca;  // ratio 4 is the one with the indexer
    if (r != 0) {
      one_rate_per_kind &= !rates.contains(kind) || rates[kind] == r;
      rates[kind] = r;
    }
    types.push_back(kind);
    per_layer.push_back(r);
    mlp.push_back(c.is_hash_layer(l) ? "hash_moe" : "moe");
  }
  if (!rates.contains(kCsa)) rates[kCsa] = 4;
  if (!rates.contains(kHca)) rates[kHca] = 128;
  j["layer_types"] = types;
  // By kind where each kind has one ratio (as transformers writes it), else one entry per layer.
  j["compress_rates"] = one_rate_per_kind ? rates : per_layer;
  j["mlp_layer_types"] = mlp;
  j["partial_rotary_factor"] = double(c.qk_rope_head_dim) / double(c.head_dim);
  json compress = {{"rope_type", "default"}, {"rope_theta", c.compress_rope_theta}};
  if (c.rope_scaling.enabled) {
    compress["rope_type"] = "yarn";
    compress["factor"] = c.rope_scaling.factor;
    compress["original_max_position_embeddings"] = c.rope_scaling.original_max_position_embeddings;
    compress["beta_fast"] = c.rope_scaling.beta_fast;
    compress["beta_slow"] = c.rope_scaling.beta_slow;
  }
  j["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}}, {"compress", compress}};
  return j;
}

}  // namespace dsv4
