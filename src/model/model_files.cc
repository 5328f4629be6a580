#include "model/model_files.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// What a user most likely meant by a directory that is not a checkpoint: the checkpoints one or
// two levels below it (a download's parent folder, a Hugging Face cache's snapshots/<hash>).
std::string checkpoints_below(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end && found.size() < 4; it.increment(ec)) {
    if (it.depth() > 2) it.disable_recursion_pending();
    else if (it->is_directory(ec) && fs::exists(it->path() / "config.json", ec)) found.push_back(it->path().string());
  }
  if (found.empty()) return "";
  std::string s = "; checkpoints below it: ";
  for (size_t i = 0; i < found.size(); ++i) s += (i ? ", " : "") + found[i];
  return s;
}

std::unique_ptr<ModelFiles> ModelFiles::open(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  DSV4_CHECK(fs::exists(dir), dir.string(), ": no such directory (--model takes a checkpoint's directory)");
  DSV4_CHECK(fs::is_directory(dir), dir.string(), ": not a directory (--model takes a checkpoint's directory, ",
             "with config.json and the safetensors shards)");
  DSV4_CHECK(fs::exists(dir / "config.json"), dir.string(), ": not a checkpoint (no config.json; a DeepSeek-V4 ",
             "checkpoint's directory holds config.json and model*.safetensors)", checkpoints_below(dir));
  auto m = std::make_unique<ModelFiles>();
  m->dir = dir;
  m->config = load_config(dir / "config.json");
  m->store = TensorStore::open(dir);
  m->weights = bind_weights(m->store, m->config);
  return m;
}

}  // namespace dsv4
