// config.json in both dialects (the release's and transformers'). A config that parses is
// written in the HF dialect and read back: the same model.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/config.h"
#include "io/config_hf.h"

using namespace dsv4;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;  // not JSON: the JSON library's business
  ModelConfig c;
  try {
    c = parse_config(j, "fuzz/config.json");
  } catch (const Error&) {
    return 0;
  }
  const nlohmann::json hf = to_hf_config_json(c);
  ModelConfig back;
  try {
    back = parse_config(hf, "fuzz/hf_config.json");
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    FUZZ_CHECK(false, "a valid config written in the HF dialect does not read back");
  }
  FUZZ_CHECK(to_hf_config_json(back) == hf, "the HF dialect does not round-trip");
  return 0;
}
