// The tokenizer that ships with a checkpoint (tokenizer.json + tokenizer_config.json).
#pragma once
#include <filesystem>

#include "io/config.h"
#include "text/tokenizer.h"

namespace dsv4 {

// Throws naming the directory when the checkpoint has no tokenizer, or when the
// tokenizer's vocabulary does not fit the model's.
text::Tokenizer load_model_tokenizer(const std::filesystem::path& dir, const ModelConfig& config);

// The stop token of chat and text generation: the tokenizer's EOS, else the config's.
int32_t stop_token(const text::Tokenizer& tok, const ModelConfig& config);

}  // namespace dsv4
