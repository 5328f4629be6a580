#include "model/model_files.h"

#include <fstream>
#include <sstream>

#include "cache/state_file.h"
#include "core/error.h"

namespace dsv4 {

uint64_t ModelFiles::weight_bytes() const {
  uint64_t total = 0;
  for (const TensorInfo* t : store.all()) total += t->nbytes;
  return total;
}

uint64_t ModelFiles::identity() const {
  StreamHash h;
  std::ifstream config_file(dir / "config.json", std::ios::binary);
  std::stringstream config_text;
  config_text << config_file.rdbuf();
  const std::string text = config_text.str();
  h.add(text.data(), text.size());
  for (const TensorInfo* t : store.all()) {
    h.add(t->name.data(), t->name.size());
    const int32_t type = int32_t(t->dtype);
    h.add(&type, sizeof type);
    h.add(t->shape.data(), t->shape.size() * sizeof(int64_t));
    h.add(&t->nbytes, sizeof t->nbytes);
    h.add(t->data, std::min<size_t>(t->nbytes, 64));  // the weights themselves, sampled
  }
  return h.value();
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
