// generate --prompt TEXT: tokenize with the checkpoint's tokenizer, stream the text out.
#pragma once
#include <string>

#include "speculative/context_limit.h"
#include "engine/engine.h"
#include "speculative/speculative_decoder.h"

namespace dsv4::cli {

// limit (if any): the prompt must fit under it, and generation stops there.
int generate_text(Engine& engine, const std::string& prompt, const GenerateOptions& options, bool json,
                  int64_t prefill_chunk = SpeculativeDecoder::kDefaultPrefillChunk, const ContextLimit* limit = nullptr);

}  // namespace dsv4::cli
