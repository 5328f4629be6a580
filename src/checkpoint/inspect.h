// `dsv4 inspect`: what a checkpoint directory holds and whether it is complete.
//
// Reads config.json and the safetensors headers only (the shards are mapped, never
// read), binds the tensors as the engine does (check_weights: either naming family, each
// matrix's encoding from its own tensors) and summarizes sizes, layer kinds, hash routing,
// the MTP module or the DSpark drafter (DeepSeek-V4-Flash-0731), and the encoding of each module
// group with the bytes a decode step reads per token under it (a DSpark draft step's per step).
// Problems opening the checkpoint (missing shard, bad header, truncated file) are reported, never
// thrown.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "checkpoint/encoding_summary.h"
#include "io/config.h"

namespace dsv4 {

struct DtypeSummary {
  int64_t tensors = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;
};

struct TensorProblem {
  std::string name;
  std::string detail;  // "shape [128], expected [256]", "dtype I8, expected F8_E4M3"
};

// A DSpark drafter (config.json's dspark_* keys), in place of the MTP module.
struct DSparkSummary {
  bool configured = false;            // config.json has dspark_block_size > 0
  bool present = false;               // the checkpoint stores its stages (mtp.N.*)
  int64_t stages = 0;                 // compress_ratios entries after the target's layers
  int64_t block_size = 0, markov_rank = 0, noise_token_id = 0;
  std::vector<int64_t> target_layer_ids;
  std::string note;                   // why it counts as absent
};

struct InspectReport {
  std::string path;
  std::string error;                  // set when the checkpoint could not be opened at all
  ModelConfig config;
  int shards = 0;
  int64_t tensors = 0;
  uint64_t bytes = 0;                 // tensor data
  int64_t parameters = 0;             // weights: packed 4-bit codes counted one per value, scales excluded
  std::map<std::string, DtypeSummary> dtypes;
  std::map<std::string, uint64_t> group_bytes;  // "embed", "head", "layers.0", "mtp.0", ...

  // Target layers by attention kind: 0 window only, 4 CSA (with indexer), 128 HCA, others.
  std::vector<int64_t> window_layers, csa_layers, hca_layers;
  std::map<int64_t, std::vector<int64_t>> other_ratio_layers;
  std::vector<int64_t> hash_layers;

  int64_t mtp_configured = 0;         // num_nextn_predict_layers
  bool mtp_present = false;
  std::string mtp_note;               // why the MTP module counts as absent
  DSparkSummary dspark;               // configured: reported instead of the MTP module

  std::string naming;                 // "release" or "hf" (Hugging Face transformers names)
  std::vector<ModuleEncoding> modules;  // encoding and decode bytes per module group
  double decode_bytes_per_token = 0;  // one target decode step (MTP excluded)

  std::vector<std::string> missing;   // in table order
  std::vector<std::string> unexpected;
  std::vector<std::string> aliases;   // MTP copies of embed/head: allowed, not used
  std::vector<TensorProblem> mismatched;
  // Set when the tensors and config.json disagree on the drafter as a whole (DSpark tensors without
  // the dspark_* keys, a classic MTP beside them, more stages than configured): nothing is bound.
  std::string inconsistent;

  bool opened() const { return error.empty(); }
  bool complete() const {
    return opened() && inconsistent.empty() && missing.empty() && unexpected.empty() && mismatched.empty();
  }
};

InspectReport inspect_checkpoint(const std::filesystem::path& dir);

nlohmann::json report_to_json(const InspectReport& report);
std::string format_report(const InspectReport& report);

}  // namespace dsv4
