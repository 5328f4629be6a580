#include "checkpoint/inspect.h"
#include "checkpoint/name_match.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cache/sequence_cache.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace dsv4 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}


void classify_layers(InspectReport& r) {
  const ModelConfig& c = r.config;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t ratio = c.compress_ratio(l);
    if (ratio == 0) r.window_layers.push_back(l);
    else if (ratio == 4) r.csa_layers.push_back(l);
    else if (ratio == 128) r.hca_layers.push_back(l);
    else r.other_ratio_layers[ratio].push_back(l);
    if (c.is_hash_layer(l)) r.hash_layers.push_back(l);
  }
}

void compare_with_table(InspectReport& r, const TensorStore& store) {
  WeightCheck check;
  try {
    check = check_weights(store, r.config);
  } catch (const Error& e) {  // the drafter's tensors and config.json disagree: a checkpoint, but inconsistent
    r.inconsistent = e.what();
  }
  r.naming = tensor_naming_name(check.naming);
  r.missing = std::move(check.missing);
  r.unexpected = std::move(check.unexpected);
  r.aliases = std::move(check.aliases);
  for (WeightProblem& p : check.problems) r.mismatched.push_back({p.name, std::move(p.detail)});
  r.group_bytes = std::move(check.group_bytes);
  r.dspark.present = check.weights.dspark.has_value();
  if (r.dspark.configured && !r.dspark.present)
    r.dspark.note = r.inconsistent.empty() ? "the checkpoint has no mtp.* tensors: the target runs alone"
                                           : "not bound: its tensors and config.json disagree, see 'inconsistent'";
  r.modules = summarize_encodings(check.weights, r.config);
  r.decode_bytes_per_token = target_decode_bytes_per_token(r.modules);
  const std::vector<const TensorInfo*> all = store.all();
  for (const TensorInfo* t : all) {
    DtypeSummary& d = r.dtypes[std::string(dtype_name(t->dtype))];
    d.tensors += 1;
    d.elements += t->numel();
    d.bytes += t->nbytes;
    r.bytes += t->nbytes;
    // Scales and shapes of quantized weights are not parameters; packed codes count per value.
    if (t->dtype == DType::F8_E8M0) continue;
    bool companion = false;
    for (const char* suffix : {".weight_scale", ".weight_scale_inv", ".weight_scale_2", ".weight_global_scale",
                               ".input_scale", ".input_global_scale", ".weight_shape"})
      companion |= ends_with(t->name, suffix);
    if (companion) continue;
    const bool packed = ends_with(t->name, ".weight") || ends_with(t->name, ".weight_packed");
    const int64_t per_element = !packed ? 1 : t->dtype == DType::I32 ? 8 : t->dtype == DType::I8 || t->dtype == DType::U8 ? 2 : 1;
    r.parameters += t->numel() * per_element;
  }
  r.tensors = int64_t(all.size());
}

}  // namespace

InspectReport inspect_checkpoint(const fs::path& dir) {
  InspectReport r;
  r.path = dir.string();
  try {
    DSV4_CHECK(fs::is_directory(dir), dir.string(), ": not a checkpoint directory");
    r.config = load_config(dir / "config.json");
    const TensorStore store = TensorStore::open(dir);
    r.shards = int(store.files().size());
    r.mtp_configured = r.config.num_nextn_predict_layers;
    r.mtp_present = has_mtp_module(store, r.config, 0);
    if (r.config.has_dspark()) r.mtp_note = "config.json describes a DSpark drafter: mtp.* holds its stages";
    else if (r.mtp_configured == 0) r.mtp_note = "num_nextn_predict_layers is 0";
    else if (!r.mtp_present) r.mtp_note = "the checkpoint has no mtp.0.enorm.weight";
    DSparkSummary& d = r.dspark;
    d.configured = r.config.has_dspark();
    if (d.configured) {
      d.stages = r.config.num_drafter_layers();
      d.block_size = r.config.dspark_block_size;
      d.markov_rank = r.config.dspark_markov_rank;
      d.noise_token_id = r.config.dspark_noise_token_id;
      d.target_layer_ids = r.config.dspark_target_layer_ids;
    }
    classify_layers(r);
    compare_with_table(r, store);
  } catch (const Error& e) {
    r.error = e.what();
  } catch (const std::exception& e) {  // e.g. std::bad_alloc, filesystem errors
    r.error = cat(dir.string(), ": ", e.what());
  }
  return r;
}

json report_to_json(const InspectReport& r) {
  json j;
  j["path"] = r.path;
  j["complete"] = r.complete();
  if (!r.opened()) {
    j["error"] = r.error;
    return j;
  }
  j["shards"] = r.shards;
  j["tensors"] = r.tensors;
  j["bytes"] = r.bytes;
  j["parameters"] = r.parameters;
  j["config"] = r.config.to_json();
  if (r.opened()) {
    const CacheFootprint f = model_cache_footprint(r.config, 16);
    j["cache"] = {{"bytes_per_token", f.bytes_per_token}, {"fixed_bytes", f.fixed_bytes}, {"rollback_limit", 16}};
  }
  json dtypes = json::object();
  for (auto& [name, d] : r.dtypes)
    dtypes[name] = {{"tensors", d.tensors}, {"elements", d.elements}, {"bytes", d.bytes}};
  j["dtypes"] = dtypes;
  j["group_bytes"] = r.group_bytes;
  json other = json::object();
  for (auto& [ratio, layers] : r.other_ratio_layers) other[std::to_string(ratio)] = layers;
  j["layers"] = {{"count", r.config.num_hidden_layers},
                 {"window", r.window_layers},
                 {"csa", r.csa_layers},
                 {"hca", r.hca_layers},
                 {"other", other}};
  j["hash_layers"] = r.hash_layers;
  j["naming"] = r.naming;
  json modules = json::array();
  for (const ModuleEncoding& m : r.modules)
    modules.push_back({{"module", m.module}, {"encoding", m.encoding()}, {"format_bytes", m.format_bytes},
                       {"bytes", m.bytes}, {"bytes_per_token", m.bytes_per_token}, {"per", m.per},
                       {"counted", m.note}});
  j["modules"] = modules;
  j["decode_bytes_per_token"] = r.decode_bytes_per_token;
  j["aliases"] = r.aliases;
  j["mtp_configured"] = r.mtp_configured;
  j["mtp_present"] = r.mtp_present;
  if (!r.mtp_note.empty()) j["mtp_note"] = r.mtp_note;
  if (r.dspark.configured) {
    const DSparkSummary& d = r.dspark;
    j["dspark"] = {{"present", d.present}, {"stages", d.stages}, {"block_size", d.block_size},
                   {"target_layer_ids", d.target_layer_ids}, {"markov_rank", d.markov_rank},
                   {"noise_token_id", d.noise_token_id}};
    if (!d.note.empty()) j["dspark"]["note"] = d.note;
  }
  if (!r.inconsistent.empty()) j["inconsistent"] = r.inconsistent;
  j["missing"] = r.missing;
  j["unexpected"] = r.unexpected;
  json mismatched = json::array();
  for (auto& p : r.mismatched) mismatched.push_back({{"name", p.name}, {"problem", p.detail}});
  j["mismatched"] = mismatched;
  return j;
}

namespace {

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
  else if (b >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(1ull << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string list_string(const std::vector<int64_t>& v) {
  return shape_string(v);
}

// "DSpark drafter: 3 stages, block 5, taps 40,41,42, Markov rank 256, noise token 128799".
std::string dspark_line(const DSparkSummary& d) {
  if (!d.present) return "DSpark drafter: absent (" + d.note + ")";
  std::string taps;
  for (int64_t id : d.target_layer_ids) taps += (taps.empty() ? "" : ",") + std::to_string(id);
  return cat("DSpark drafter: ", d.stages, " stages, block ", d.block_size, ", taps ", taps, ", Markov rank ",
             d.markov_rank, ", noise token ", d.noise_token_id);
}

// Which published model the dimensions are (hidden size and heads tell V4-Flash from V4-Pro),
// and how far a checkpoint made to fit a test machine is shrunk from it.
std::string model_line(const ModelConfig& c) {
  struct Published {
    const char* name;
    int64_t hidden, heads, layers, experts, vocab;
  };
  static constexpr Published kModels[] = {{"DeepSeek-V4-Flash", 4096, 64, 43, 256, 129280},
                                          {"DeepSeek-V4-Pro", 7168, 128, 61, 384, 129280}};
  for (const Published& m : kModels) {
    if (c.hidden_size != m.hidden || c.num_attention_heads != m.heads) continue;
    std::string shrunk;
    if (c.num_hidden_layers != m.layers) shrunk += cat(", ", c.num_hidden_layers, " of its ", m.layers, " layers");
    if (c.n_routed_experts != m.experts) shrunk += cat(", ", c.n_routed_experts, " of its ", m.experts, " experts");
    if (c.vocab_size != m.vocab) shrunk += cat(", vocabulary ", c.vocab_size, " (its ", m.vocab, ")");
    return cat("model: ", m.name, "'s dimensions", shrunk);
  }
  const bool pro_pattern = !c.compress_ratios.empty() && c.compress_ratios[0] == 128;
  return cat("model: other dimensions (", pro_pattern ? "V4-Pro's layer pattern: no window-only layer" :
                                                       "V4-Flash's layer pattern", ")");
}

}  // namespace

std::string format_report(const InspectReport& r) {
  std::string s;
  auto line = [&](const std::string& text) { s += text + "\n"; };
  line("checkpoint: " + r.path);
  if (!r.opened()) {
    line("error: " + r.error);
    line("status: cannot be opened");
    return s;
  }
  const ModelConfig& c = r.config;
  line(cat("  ", r.shards, " shard(s), ", r.tensors, " tensors, ", human_bytes(r.bytes), " of tensor data, ",
           r.parameters, " parameters (packed 4-bit values counted singly, scales excluded)"));
  const std::string drafter = c.has_dspark() ? cat(c.num_drafter_layers(), " DSpark stages")
                                             : cat(c.num_nextn_predict_layers, " MTP");
  line(model_line(c));
  line(cat("config: vocab ", c.vocab_size, ", hidden ", c.hidden_size, ", ", c.num_hidden_layers, " layers + ",
           drafter, ", ", c.num_attention_heads, " heads x ", c.head_dim, ", ",
           c.n_routed_experts, " experts (", c.num_experts_per_tok, " per token), hc ", c.hc_mult));
  line("dtypes:");
  for (auto& [name, d] : r.dtypes) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-8s %7lld tensors %15lld elements %12s", name.c_str(),
                  static_cast<long long>(d.tensors), static_cast<long long>(d.elements), human_bytes(d.bytes).c_str());
    line(buf);
  }
  line("layers:");
  line("  window only (ratio 0):          " + list_string(r.window_layers));
  line("  CSA (ratio 4, with indexer):    " + list_string(r.csa_layers));
  line("  HCA (ratio 128):                " + list_string(r.hca_layers));
  for (auto& [ratio, layers] : r.other_ratio_layers) line(cat("  compressed (ratio ", ratio, "):  ", list_string(layers)));
  line("  hash-routed:                    " + list_string(r.hash_layers));
  {
    // The cache per sequence (rollback limit 16, as the engine's default).
    const CacheFootprint f = model_cache_footprint(c, 16);
    char buf[200];
    std::snprintf(buf, sizeof buf, "cache per sequence: %.1f B per token + %s (window, rollback, pending blocks); "
                  "at %lld tokens (max position): %s", f.bytes_per_token, human_bytes(uint64_t(f.fixed_bytes)).c_str(),
                  static_cast<long long>(c.max_position_embeddings),
                  human_bytes(uint64_t(f.at(c.max_position_embeddings))).c_str());
    line(buf);
    const double csa = layer_cache_footprint(cache_geometry_for(c, 4), 16).bytes_per_token;
    const double hca = layer_cache_footprint(cache_geometry_for(c, 128), 16).bytes_per_token;
    std::snprintf(buf, sizeof buf, "  per layer and token: CSA %.1f B, HCA %.1f B, window only 0 B", csa, hca);
    line(buf);
  }
  line("names: " + r.naming + (r.naming == "hf" ? " (Hugging Face transformers)" : " (the release's)"));
  line("encodings (bytes a decode step reads per token):");
  for (const ModuleEncoding& m : r.modules) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "  %-22s %-32s %12s per %s", m.module.c_str(), m.encoding().c_str(),
                  human_bytes(uint64_t(std::llround(m.bytes_per_token))).c_str(), m.per.c_str());
    line(std::string(buf) + "  (" + m.note + ")");  // (notes run long: the DSpark one)
  }
  line("  target decode step: " + human_bytes(uint64_t(std::llround(r.decode_bytes_per_token))) + " per token");
  if (r.dspark.configured) line(dspark_line(r.dspark));
  else if (r.mtp_present) line(cat("MTP: present (", r.mtp_configured, " module(s) configured)"));
  else line("MTP: absent (" + r.mtp_note + ")");
  if (!r.inconsistent.empty()) line("inconsistent: " + r.inconsistent);
  line(cat("missing tensors: ", r.missing.size()));
  for (auto& n : r.missing) line("  missing: " + n);
  line(cat("unexpected tensors: ", r.unexpected.size()));
  for (auto& n : r.unexpected) line("  unexpected: " + n);
  for (auto& n : r.aliases) line("  MTP copy of embed/head (not used): " + n);
  line(cat("mis-shaped or mis-typed tensors: ", r.mismatched.size()));
  for (auto& p : r.mismatched) line("  mismatched: " + p.name + ": " + p.detail);
  line(r.complete() ? "status: complete" : "status: INCOMPLETE or inconsistent");
  return s;
}

}  // namespace dsv4
