#include "generate_text.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "metrics_report.h"
#include "engine/model_tokenizer.h"

namespace dsv4::cli {

int generate_text(Engine& engine, const std::string& prompt, const GenerateOptions& options, bool json,
                  int64_t prefill_chunk, const ContextLimit* limit) {
  const text::Tokenizer tok = load_model_tokenizer(engine.files->dir, engine.config());
  const std::vector<int32_t> ids = tok.encode(prompt, /*add_bos=*/true);
  GenerateOptions o = options;
  if (limit) limit->apply(int64_t(ids.size()), o, "generate");
  if (o.eos) o.eos = stop_token(tok, engine.config());
  // Text goes out as soon as its tokens are accepted (several at once after a speculative
  // step); the decoder holds back bytes of a character split across tokens.
  text::StreamingDecoder stream(tok, /*skip_special=*/true);
  std::string all_text;
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  decoder.set_prefill_chunk(prefill_chunk);
  auto outputs = decoder.generate(std::vector<std::vector<int32_t>>{ids}, o,
                                  [&](size_t, std::span<const int32_t> tokens) {
                                    std::string piece;
                                    for (int32_t t : tokens) piece += stream.push(t);
                                    all_text += piece;
                                    if (!json) {
                                      std::fputs(piece.c_str(), stdout);
                                      std::fflush(stdout);
                                    }
                                  });
  const std::string rest = stream.flush();
  all_text += rest;
  const DecodeMetrics& m = decoder.metrics();
  if (json) {
    nlohmann::json j;
    j["text"] = all_text;
    j["prompt_tokens"] = ids;
    j["tokens"] = outputs[0].tokens;
    add_metrics(j, m, o.draft_tokens);
    j["backend"] = engine.backend->name();
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s\n", rest.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "[%zu prompt tokens, %zu generated; %s]\n", ids.size(), outputs[0].tokens.size(),
               metrics_line(m, o.draft_tokens).c_str());
  return 0;
}

}  // namespace dsv4::cli
