#include "engine/engine.h"

namespace dsv4 {

std::unique_ptr<Engine> Engine::open(const std::filesystem::path& dir, const EngineOptions& options) {
  auto e = std::make_unique<Engine>();
  e->files = ModelFiles::open(dir);
  e->backend = make_backend(options.backend);
  e->backend->prepare(weight_views(e->files->weights, e->files->config));
  e->target = std::make_unique<Transformer>(e->files->config, e->files->weights, *e->backend,
                                            TransformerOptions{options.max_rollback});
  if (options.load_mtp && e->files->has_mtp()) {
    e->mtp = std::make_unique<MtpModule>(*e->target, e->files->weights.mtp[0],
                                         MtpOptions{options.mtp_vocab, options.max_rollback});
    e->proposer = std::make_unique<MtpProposer>(*e->mtp);
  }
  return e;
}

}  // namespace dsv4
