// generate --prompt TEXT: tokenize with the checkpoint's tokenizer, stream the text out.
#pragma once
#include <functional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "progress_meter.h"
#include "speculative/context_limit.h"
#include "engine/engine.h"
#include "speculative/speculative_decoder.h"

namespace dsv4::cli {

// A grammar the output must match (--json-schema / --grammar): its GBNF text and the file it
// came from (for messages).
struct OutputGrammar {
  std::string gbnf, file;
};

// limit (if any): the prompt must fit under it, and generation stops there. grammar (if any):
// the output is constrained to it; an output the budget cut before the grammar completed is
// reported ("grammar_complete": false with --json, a warning otherwise). report (if any) adds the
// run's other facts to the --json object (the drafter, the bounded head, the pipeline stages).
int generate_text(Engine& engine, const std::string& prompt, const GenerateOptions& options, bool json,
                  int64_t prefill_chunk = SpeculativeDecoder::kDefaultPrefillChunk, const ContextLimit* limit = nullptr,
                  const OutputGrammar* grammar = nullptr, ProgressMeter* meter = nullptr,
                  const std::function<void(nlohmann::json&)>& report = {});

// The warning printed for an output cut short inside its grammar.
void warn_incomplete(const OutputGrammar& grammar);

}  // namespace dsv4::cli
