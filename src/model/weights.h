// The model's weights: typed, non-owning views (backend/weight_view.h) over the
// memory-mapped checkpoint, grouped as the model uses them.
//
// The checkpoint's tensor table is declared once, in visit_model_weights() (weights.cc):
// the same walk produces the list of expected tensors (names, shapes, dtypes) for
// `inspect` and binds the views for the model. Nothing is copied or dequantized here;
// kernels read the formats directly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/weight_view.h"
#include "core/dtype.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace dsv4 {

struct CompressorWeights {
  int64_t ratio = 0;
  int64_t head_dim = 0;     // w: width of one compressed entry
  bool overlap = false;     // ratio 4: projections are 2w wide and pool two blocks
  WeightView ape, wkv, wgate, norm;
};

struct IndexerWeights {
  WeightView wq_b, weights_proj;
  CompressorWeights compressor;
};

struct AttentionWeights {
  WeightView attn_sink, wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b;
  std::optional<CompressorWeights> compressor;  // ratio > 0
  std::optional<IndexerWeights> indexer;        // ratio == 4
};

struct MoeWeights {
  WeightView gate;      // [E, D]
  WeightView bias;      // [E] (score-routed layers)
  WeightView tid2eid;   // [V, k] (hash-routed layers)
  ExpertWeights shared;
  std::vector<ExpertWeights> experts;
};

struct BlockWeights {
  int64_t layer = 0;          // index into compress_ratios
  int64_t compress_ratio = 0;
  bool hash_routed = false;
  HcWeights hc_attn, hc_ffn;
  WeightView attn_norm, ffn_norm;
  AttentionWeights attn;
  MoeWeights ffn;
};

struct MtpWeights {
  BlockWeights block;
  WeightView e_proj, h_proj, enorm, hnorm, norm;
  HcHeadWeights hc_head;
};

struct ModelWeights {
  WeightView embed, head, norm;
  HcHeadWeights hc_head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;   // empty when the checkpoint has no MTP module
};

// ---- The tensor table -----------------------------------------------------------

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<DType> dtypes;     // allowed
  std::string group;             // "embed", "layers.3", "mtp.0", ... (for summaries)
};

// Whether the checkpoint carries MTP module `index` (keyed by mtp.N.enorm.weight).
bool has_mtp_module(const TensorStore& store, const ModelConfig& config, int64_t index = 0);

// Every tensor a complete checkpoint holds; MTP modules only when `with_mtp`.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config, bool with_mtp);

// Binds the views; throws Error naming the first missing, mis-typed or mis-shaped tensor.
// MTP modules are bound when present (see has_mtp_module); absent ones leave `mtp` empty.
ModelWeights bind_weights(const TensorStore& store, const ModelConfig& config);

// Every bound view of `weights` (one per weight tensor; a scale belongs to its weight's view),
// for Backend::prepare.
std::vector<WeightView*> weight_views(ModelWeights& weights, const ModelConfig& config);

}  // namespace dsv4
