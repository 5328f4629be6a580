// A checkpoint loaded for generation: the mapped weights, a backend, the target model
// and — when the checkpoint has one and it is wanted — the MTP module as draft proposer.
#pragma once
#include <filesystem>
#include <memory>

#include "backend/backends.h"
#include "model/model_files.h"
#include "model/mtp.h"
#include "model/transformer.h"
#include "speculative/mtp_proposer.h"

namespace dsv4 {

struct EngineOptions {
  BackendOptions backend;          // which backend runs the model (and its threads)
  bool load_mtp = true;            // false: no draft proposer even if the checkpoint has one
  int64_t mtp_vocab = 0;           // draft LM head limited to the first N rows (0 = full)
  int64_t max_rollback = 16;       // longest rollback (>= draft tokens + 1)
};

struct Engine {
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> target;
  std::unique_ptr<MtpModule> mtp;        // null when absent or not wanted
  std::unique_ptr<MtpProposer> proposer;

  const ModelConfig& config() const { return files->config; }
  static std::unique_ptr<Engine> open(const std::filesystem::path& dir, const EngineOptions& options = {});
};

}  // namespace dsv4
