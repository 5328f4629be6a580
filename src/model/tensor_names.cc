#include "model/tensor_names.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace dsv4 {

namespace {

using SegmentTable = std::initializer_list<std::pair<std::string_view, std::string_view>>;

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool replace_prefix(std::string& s, std::string_view from, std::string_view to) {
  if (!starts_with(s, from)) return false;
  s = std::string(to) + s.substr(from.size());
  return true;
}

// When s starts with `from_scope`, the module segment after it (up to the next '.') is looked
// up in `table`; on a hit s becomes to_scope + the table's name + the rest. Returns the hit.
bool map_segment(std::string& s, std::string_view from_scope, std::string_view to_scope, SegmentTable table) {
  if (!starts_with(s, from_scope)) return false;
  const size_t begin = from_scope.size();
  const size_t end = std::min(s.find('.', begin), s.size());
  const std::string_view segment = std::string_view(s).substr(begin, end - begin);
  for (const auto& [from, to] : table)
    if (segment == from) {
      s = std::string(to_scope) + std::string(to) + s.substr(end);
      return true;
    }
  return false;
}

// "layers.3." / "mtp.0." and the rest, or an empty prefix for names outside blocks.
std::pair<std::string, std::string> split_block(const std::string& name) {
  if (!starts_with(name, "layers.") && !starts_with(name, "mtp.")) return {"", name};
  const size_t dot = name.find('.');
  const size_t end = name.find('.', dot + 1);
  if (end == std::string::npos) return {"", name};
  return {name.substr(0, end + 1), name.substr(end + 1)};
}

// "experts.17." of "experts.17.w1.weight" (scope includes the expert number), or "".
std::string expert_scope(const std::string& s, std::string_view experts) {
  if (!starts_with(s, experts)) return "";
  const size_t end = s.find('.', experts.size());
  return end == std::string::npos ? "" : s.substr(0, end + 1);
}

const SegmentTable kCompressorFromHf = {
    {"kv_proj", "wkv"}, {"gate_proj", "wgate"}, {"kv_norm", "norm"}, {"position_bias", "ape"}};
const SegmentTable kCompressorToHf = {
    {"wkv", "kv_proj"}, {"wgate", "gate_proj"}, {"norm", "kv_norm"}, {"ape", "position_bias"}};
const SegmentTable kExpertFromHf = {{"gate_proj", "w1"}, {"up_proj", "w3"}, {"down_proj", "w2"}};
const SegmentTable kExpertToHf = {{"w1", "gate_proj"}, {"w3", "up_proj"}, {"w2", "down_proj"}};

std::string block_release_name(std::string r) {
  (void)(replace_prefix(r, "attn_hc.", "hc_attn_") || replace_prefix(r, "ffn_hc.", "hc_ffn_") ||
      replace_prefix(r, "hc_head.hc_", "hc_head_") || replace_prefix(r, "input_layernorm.", "attn_norm.") ||
      replace_prefix(r, "post_attention_layernorm.", "ffn_norm."));
  (void)(replace_prefix(r, "self_attn.", "attn.") || replace_prefix(r, "mlp.", "ffn."));
  // The HF indexer hangs under the compressor (sometimes with its weights_proj under `scorer`).
  (void)(replace_prefix(r, "attn.compressor.indexer.scorer.", "attn.indexer.") ||
      replace_prefix(r, "attn.compressor.indexer.", "attn.indexer.") ||
      replace_prefix(r, "attn.indexer.scorer.", "attn.indexer."));
  (void)(map_segment(r, "attn.indexer.", "attn.indexer.",
              {{"q_b_proj", "wq_b"}, {"kv_proj", "compressor.wkv"}, {"gate_proj", "compressor.wgate"},
               {"kv_norm", "compressor.norm"}, {"position_bias", "compressor.ape"}}) ||
      map_segment(r, "attn.compressor.", "attn.compressor.", kCompressorFromHf) ||
      map_segment(r, "attn.", "attn.",
                  {{"q_a_proj", "wq_a"}, {"q_a_norm", "q_norm"}, {"q_b_proj", "wq_b"}, {"kv_proj", "wkv"},
                   {"o_a_proj", "wo_a"}, {"o_b_proj", "wo_b"}, {"sinks", "attn_sink"}}) ||
      map_segment(r, "ffn.gate.", "ffn.gate.", {{"e_score_correction_bias", "bias"}}) ||
      map_segment(r, "ffn.shared_experts.", "ffn.shared_experts.", kExpertFromHf));
  const std::string experts = expert_scope(r, "ffn.experts.");
  if (!experts.empty()) map_segment(r, experts, experts, kExpertFromHf);
  return r;
}

std::string block_hf_name(std::string r) {
  (void)(replace_prefix(r, "hc_attn_", "attn_hc.") || replace_prefix(r, "hc_ffn_", "ffn_hc.") ||
      replace_prefix(r, "attn_norm.", "input_layernorm.") || replace_prefix(r, "ffn_norm.", "post_attention_layernorm."));
  const std::string experts = expert_scope(r, "ffn.experts.");
  (void)(map_segment(r, "attn.indexer.compressor.", "self_attn.compressor.indexer.", kCompressorToHf) ||
      map_segment(r, "attn.indexer.", "self_attn.compressor.indexer.",
                  {{"wq_b", "q_b_proj"}, {"weights_proj", "weights_proj"}}) ||
      map_segment(r, "attn.compressor.", "self_attn.compressor.", kCompressorToHf) ||
      map_segment(r, "attn.", "self_attn.",
                  {{"wq_a", "q_a_proj"}, {"q_norm", "q_a_norm"}, {"wq_b", "q_b_proj"}, {"wkv", "kv_proj"},
                   {"kv_norm", "kv_norm"}, {"wo_a", "o_a_proj"}, {"wo_b", "o_b_proj"}, {"attn_sink", "sinks"}}) ||
      map_segment(r, "ffn.gate.", "mlp.gate.",
                  {{"weight", "weight"}, {"bias", "e_score_correction_bias"}, {"tid2eid", "tid2eid"}}) ||
      map_segment(r, "ffn.shared_experts.", "mlp.shared_experts.", kExpertToHf) ||
      (!experts.empty() && map_segment(r, experts, "mlp." + experts.substr(4), kExpertToHf)));
  return r;
}

}  // namespace

std::string release_tensor_name(std::string_view stored) {
  std::string n(stored);
  replace_prefix(n, "model.", "");
  if (n == "lm_head.weight") return "head.weight";
  if (replace_prefix(n, "embed_tokens.", "embed.") || replace_prefix(n, "hc_head.hc_", "hc_head_")) return n;
  auto [block, rest] = split_block(n);
  if (block.empty()) return n;
  return block + block_release_name(rest);
}

std::string hf_tensor_name(std::string_view release) {
  std::string n(release);
  if (n == "head.weight") return "lm_head.weight";
  if (replace_prefix(n, "embed.", "model.embed_tokens.") || replace_prefix(n, "hc_head_", "model.hc_head.hc_"))
    return n;
  auto [block, rest] = split_block(n);
  if (block.empty()) return "model." + n;  // norm.weight
  // The MTP module has no transformers class; its patched loaders keep `mtp.N.` at the top.
  return (starts_with(block, "layers.") ? "model." : "") + block + block_hf_name(rest);
}

bool is_mtp_alias(std::string_view name) {
  if (!starts_with(name, "mtp.")) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string_view::npos) return false;
  const std::string_view rest = name.substr(dot + 1);
  return rest == "emb.tok_emb.weight" || rest == "head.weight";
}

const char* tensor_naming_name(TensorNaming n) { return n == TensorNaming::Release ? "release" : "hf"; }

TensorIndex::TensorIndex(const TensorStore& store) : store_(store) {
  for (const TensorInfo* t : store.all()) {
    std::string name = release_tensor_name(t->name);
    // (the gate bias alone under its HF name is a release-named checkpoint still)
    if (name != t->name && t->name.find("e_score_correction_bias") == std::string::npos) naming_ = TensorNaming::HuggingFace;
    auto [it, inserted] = by_release_.emplace(name, t);
    DSV4_CHECK(inserted, store.root().string(), ": tensors '", it->second->name, "' (", *it->second->file, ") and '",
               t->name, "' (", *t->file, ") are both the model's '", name, "'");
  }
}

const TensorInfo* TensorIndex::find(const std::string& release_name) const {
  auto it = by_release_.find(release_name);
  return it == by_release_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, const TensorInfo*>> TensorIndex::all() const {
  std::vector<std::pair<std::string, const TensorInfo*>> v(by_release_.begin(), by_release_.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return v;
}

}  // namespace dsv4
