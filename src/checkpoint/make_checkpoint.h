// Writes deterministic synthetic checkpoints in the release format (config.json, shards,
// model.safetensors.index.json): the engine of `dsv4 make-checkpoint`. Other encodings
// (checkpoint/transcode.h) are the same model: written in the release format beside the
// output directory first, then transcoded into it.
//
// Streaming: chunks (row stripes of ~1M values) are generated in parallel in batches of
// bounded size while the previous batch is written, so memory stays bounded (tens of MB)
// whatever the checkpoint size. Output bytes depend only on (seed, config, preset):
// chunk i of a tensor always draws from the stream (seed, tensor name, i).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/mirror_dspark_weights.h"
#include "checkpoint/mirror_weights.h"
#include "checkpoint/presets.h"
#include "checkpoint/transcode.h"
#include "checkpoint/weight_jobs.h"
#include "io/config.h"

namespace dsv4 {

struct MakeCheckpointOptions {
  std::string preset = "tiny";
  uint64_t seed = 0;
  std::filesystem::path out;
  ConfigChanges changes;
  bool with_mtp = true;          // false: no mtp.* tensors, MTP or DSpark (the config keeps its drafter)
  CheckpointEncoding encoding = CheckpointEncoding::Release;  // others: the release's values transcoded
  double perturb = 0.0;          // aligned and mirror presets: e_proj = I + perturb * G; mirror-dspark:
                                 // the fraction of tokens with a wrong Markov successor
  MirrorOptions mirror;          // mirror presets (and mirror-dspark's target): the construction's
                                 // constants (perturb above wins)
  MirrorDSparkOptions mirror_dspark;  // mirror-dspark presets: the drafter's constants (perturb above wins)
  int threads = 0;               // 0 = all cores
  uint64_t max_shard_bytes = uint64_t(4) << 30;
  int min_shards = 2;
  // Called from the writing thread after each batch: bytes written so far, total bytes.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct MakeCheckpointResult {
  ModelConfig config;
  uint64_t bytes = 0;            // all files written
  int shards = 0;
  size_t tensors = 0;
  double seconds = 0;
};

MakeCheckpointResult make_checkpoint(const MakeCheckpointOptions& options);

// The lower level: writes `jobs` (with their fills) and config.json into `out`.
struct WriteOptions {
  uint64_t seed = 0;
  int threads = 0;
  uint64_t max_shard_bytes = uint64_t(4) << 30;
  int min_shards = 2;
  std::function<void(uint64_t done, uint64_t total)> progress;
};
MakeCheckpointResult write_checkpoint(const std::filesystem::path& out, const ModelConfig& config,
                                      const std::vector<WeightJob>& jobs, const WriteOptions& options);

}  // namespace dsv4
