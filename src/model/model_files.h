// A checkpoint directory opened for inference: config.json, the mapped tensors and the
// typed weight views over them. Held by pointer: the views point into the mapping.
#pragma once
#include <filesystem>
#include <memory>

#include "io/config.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace dsv4 {

struct ModelFiles {
  std::filesystem::path dir;
  ModelConfig config;
  TensorStore store;
  ModelWeights weights;

  bool has_mtp() const { return !weights.mtp.empty(); }
  // Bytes of all mapped weights.
  uint64_t weight_bytes() const;
  // The checkpoint's identity (what states kept on disk are tied to): a hash of config.json and of
  // every tensor's name, type, shape and first bytes.
  uint64_t identity() const;

  // Throws Error naming the file, key or tensor at fault.
  static std::unique_ptr<ModelFiles> open(const std::filesystem::path& dir);
};

}  // namespace dsv4
