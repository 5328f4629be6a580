// The model's weights: typed, non-owning views (backend/weight_view.h) over the
// memory-mapped checkpoint, grouped as the model uses them.
//
// The checkpoint's tensor table is declared once, in the walk of model/weight_walk.h: the
// same walk produces the list of expected tensors in the release encoding (names, shapes,
// dtypes: what make-checkpoint writes) and binds the views for the model and `inspect`
// (weight_binding.cc), in whichever encoding each weight is stored. Nothing is copied or
// dequantized here; kernels read the formats directly.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/weight_view.h"
#include "core/dtype.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "model/tensor_names.h"

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

// The DSpark drafter of DeepSeek-V4-Flash-0731 (spec: dspark.md), stored under mtp.N.*: ordinary V4
// blocks (score-routed, window-only) chained as stages, the context projection of the tapped target
// streams (stage 0), and the head side (last stage): hc_head and norm before the target's LM head,
// the Markov head and the confidence head.
struct DSparkWeights {
  std::vector<BlockWeights> stages;     // mtp.0 .. mtp.S-1
  WeightView main_proj;                 // [D, taps·D]: the concatenated taps -> main_x
  WeightView main_norm;                 // [D]
  WeightView norm;                      // [D]
  HcHeadWeights hc_head;
  WeightView markov_w1, markov_w2;      // [V, r] each: bias(prev) = W2 · W1[prev]
  WeightView confidence;                // [1, D + r]: a raw survival logit per draft
};

struct ModelWeights {
  WeightView embed, head, norm;
  HcHeadWeights hc_head;
  std::vector<BlockWeights> layers;
  std::vector<MtpWeights> mtp;   // empty when the checkpoint has no MTP module
  std::optional<DSparkWeights> dspark;  // the checkpoint's DSpark drafter (then `mtp` is empty)
  // F32 copies of the small vectors a checkpoint stores in BF16 where the release has F32 (hc,
  // ape, attention sink, gate bias: kilobytes); the views above point into them.
  std::vector<std::shared_ptr<const std::vector<float>>> widened;
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

// The DSpark stages the checkpoint holds: 0 without a drafter of that kind (keyed by its own
// tensors: main_proj, main_norm, markov_head, confidence_head), else the largest N + 1 of its
// mtp.N. prefixes (a stage stored in part counts: binding names its missing tensors).
int64_t dspark_stages_stored(const TensorStore& store);

// Every tensor a complete checkpoint in the release encoding holds (what make-checkpoint writes);
// the drafter (MTP modules or DSpark stages, as the config says) only when `with_mtp`.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config, bool with_mtp);

// Binds the views; throws Error naming the first missing, mis-typed or mis-shaped tensor.
// MTP modules are bound when present (see has_mtp_module); absent ones leave `mtp` empty. A DSpark
// drafter (config dspark_* keys) is bound when any mtp.N. tensor is stored: every stage the config's
// compress_ratios lists after the target's layers (tensors of more stages throw, naming both counts).
//
// Tensors are found by release name in either naming family (model/tensor_names.h), and the
// encoding of each matrix is read from its own tensors, never from config.json: the dtype of
// `X.weight` and which companions sit beside it —
//   X.scale F8_E8M0        with X.weight F8_E4M3: FP8, one scale per 128x128 tile;
//                          with X.weight I8/U8:   FP4 (e2m1 pairs), one scale per 32 inputs;
//   X.weight_scale_2 F32   with X.weight U8 + X.weight_scale F8_E4M3: ModelOpt NVFP4 (E4M3 per 16
//                          inputs times weight_scale_2);
//   X.weight_packed U8     + X.weight_scale F8_E4M3 + X.weight_global_scale: compressed-tensors
//                          NVFP4 (the global scale stored inverted: divide);
//   X.weight_scale F32     (or X.weight_scale_inv; BF16 and F16 widened to F32 at load) with
//                          X.weight F8_E4M3: FP8 with a float multiplier per 128x128 tile (FP8F);
//   X.weight_packed I32    + X.weight_scale BF16 per 128 inputs (+ X.weight_shape): compressed-
//                          tensors INT4 W4A16, value (q - 8) x scale (INT4); other groups (as
//                          the scale's shape says, and config.json's config_groups where it
//                          states one) or F16/F32 scales: INT4G, scales widened to F32;
//   none                   X.weight BF16 or F32, used as stored;
// and each scale's shape is checked against the weight's [rows, cols]. The routed experts of
// one layer must share one encoding (their kernels are chosen once per layer).
ModelWeights bind_weights(const TensorStore& store, const ModelConfig& config);

struct WeightProblem {
  std::string name;    // the stored tensor's name
  std::string file;    // the shard holding it
  std::string detail;  // what was found, what was expected: "dtype U8, expected F8_E8M0 (...)"
};

// The same binding, collecting every problem instead of throwing at the first (inspect).
struct WeightCheck {
  ModelWeights weights;                   // the views that bound (the others stay unbound)
  TensorNaming naming = TensorNaming::Release;
  std::vector<std::string> missing;       // release names of absent tensors, in table order
  std::vector<WeightProblem> problems;    // wrong dtype, shape or encoding
  std::vector<std::string> unexpected;    // stored tensors no table entry took
  std::vector<std::string> aliases;       // MTP copies of embed/head (not used)
  std::map<std::string, uint64_t> group_bytes;  // stored bytes per table group
  bool complete() const { return missing.empty() && problems.empty() && unexpected.empty(); }
};
WeightCheck check_weights(const TensorStore& store, const ModelConfig& config);

// Every bound view of `weights` (one per weight tensor; a scale belongs to its weight's view),
// for Backend::prepare.
std::vector<WeightView*> weight_views(ModelWeights& weights, const ModelConfig& config);

}  // namespace dsv4
