#include "engine/model_tokenizer.h"

#include "core/error.h"

namespace dsv4 {

text::Tokenizer load_model_tokenizer(const std::filesystem::path& dir, const ModelConfig& config) {
  const auto json = dir / "tokenizer.json";
  DSV4_CHECK(std::filesystem::exists(json), dir.string(),
             ": no tokenizer.json (text needs the checkpoint's tokenizer; use --prompt-tokens, or make the "
             "checkpoint with `make-checkpoint --tokenizer`)");
  const auto cfg = dir / "tokenizer_config.json";
  text::Tokenizer tok = text::Tokenizer::load(json, std::filesystem::exists(cfg) ? cfg : std::filesystem::path());
  DSV4_CHECK(tok.vocab_size() <= config.vocab_size, json.string(), ": the tokenizer has ", tok.vocab_size(),
             " tokens but the model's vocabulary has ", config.vocab_size);
  return tok;
}

int32_t stop_token(const text::Tokenizer& tok, const ModelConfig& config) {
  return tok.eos_id().value_or(int32_t(config.eos_token_id));
}

}  // namespace dsv4
