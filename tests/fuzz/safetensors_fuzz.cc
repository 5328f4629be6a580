// safetensors files and checkpoint indexes. Input: either one .safetensors file, or (when it
// holds a NUL byte) an index JSON, NUL, and the bytes of the one shard the index may name
// (model-00001-of-00001.safetensors). Every tensor the reader exposes is read end to end: a
// view outside the mapping faults.
#include <cstring>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/safetensors.h"

using namespace dsv4;

namespace {

volatile uint8_t touched;  // keeps the reads

void touch(const TensorInfo& t) {
  FUZZ_CHECK(t.numel() >= 0, "negative element count");
  uint8_t sum = 0;
  for (size_t i = 0; i < t.nbytes; i += 4096) sum = uint8_t(sum + t.data[i]);
  if (t.nbytes) sum = uint8_t(sum + t.data[t.nbytes - 1]);
  touched = sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = fuzz::as_text(data, size);
  const auto& dir = fuzz::scratch_dir();
  const auto nul = in.find('\0');
  try {
    if (nul == std::string_view::npos || nul > 4096) {  // one file
      const auto path = dir / "one.safetensors";
      fuzz::write_file(path, in);
      const auto file = SafetensorsFile::open(path);
      for (const TensorInfo& t : file->tensors()) {
        touch(t);
        FUZZ_CHECK(file->find(t.name) == &t, "find() does not return the listed tensor");
      }
      return 0;
    }
    const auto store_dir = dir / "store";
    std::filesystem::remove_all(store_dir);
    std::filesystem::create_directories(store_dir);
    fuzz::write_file(store_dir / "model.safetensors.index.json", in.substr(0, nul));
    fuzz::write_file(store_dir / "model-00001-of-00001.safetensors", in.substr(nul + 1));
    const TensorStore store = TensorStore::open(store_dir);
    for (const TensorInfo* t : store.all()) {
      touch(*t);
      FUZZ_CHECK(store.find(t->name) == t, "find() does not return the listed tensor");
    }
  } catch (const Error&) {
  }
  return 0;
}
