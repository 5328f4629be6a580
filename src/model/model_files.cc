#include "model/model_files.h"

#include "core/error.h"

namespace dsv4 {

uint64_t ModelFiles::weight_bytes() const {
  uint64_t total = 0;
  for (const TensorInfo* t : store.all()) total += t->nbytes;
  return total;
}

std::unique_ptr<ModelFiles> ModelFiles::open(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  DSV4_CHECK(fs::is_directory(dir), dir.string(), ": not a checkpoint directory");
  auto m = std::make_unique<ModelFiles>();
  m->dir = dir;
  m->config = load_config(dir / "config.json");
  m->store = TensorStore::open(dir);
  m->weights = bind_weights(m->store, m->config);
  return m;
}

}  // namespace dsv4
