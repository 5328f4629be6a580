// The two naming families of DeepSeek-V4 checkpoints, and one index over either.
//
// Release names (`layers.3.attn.wq_a.weight`, `embed.weight`) are the engine's own; Hugging Face
// transformers names (`model.layers.3.self_attn.q_a_proj.weight`, `model.embed_tokens.weight`,
// `lm_head.weight`, the indexer nested under `self_attn.compressor.indexer`, `mlp.experts.E.gate_proj`,
// `mlp.gate.e_score_correction_bias`) are what transformers, llm-compressor and most BF16
// conversions write. Every stored name is translated to its release name once, at open; the
// weight table then looks tensors up by release name whatever the file says. A companion keeps
// its suffix (`.scale`, `.weight_scale`, ...): only the module path is translated.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/safetensors.h"

namespace dsv4 {

// The release name of a stored name of either family (release names come back unchanged).
std::string release_tensor_name(std::string_view stored);
// The Hugging Face transformers name of a release name (what an HF-named conversion stores).
std::string hf_tensor_name(std::string_view release);

// Whether `release_name` is a copy some repackagings add for their MTP loaders
// (`mtp.N.emb.tok_emb.weight`, `mtp.N.head.weight`: the shared embedding and head).
bool is_mtp_alias(std::string_view release_name);

enum class TensorNaming { Release, HuggingFace };
const char* tensor_naming_name(TensorNaming n);  // "release", "hf"

// The tensors of a store by release name. Throws Error when two stored tensors translate to one
// release name (naming both and their files).
class TensorIndex {
 public:
  explicit TensorIndex(const TensorStore& store);

  const TensorInfo* find(const std::string& release_name) const;
  const TensorStore& store() const { return store_; }
  // HuggingFace when any stored name was translated.
  TensorNaming naming() const { return naming_; }
  // (release name, tensor) of every stored tensor, sorted by release name.
  std::vector<std::pair<std::string, const TensorInfo*>> all() const;

 private:
  const TensorStore& store_;
  std::unordered_map<std::string, const TensorInfo*> by_release_;
  TensorNaming naming_ = TensorNaming::Release;
};

}  // namespace dsv4
