#include "generate_text.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "model_tokenizer.h"

namespace dsv4::cli {

int generate_text(Engine& engine, const std::string& prompt, const GenerateOptions& options, bool json) {
  const text::Tokenizer tok = load_model_tokenizer(engine.files->dir, engine.config());
  const std::vector<int32_t> ids = tok.encode(prompt, /*add_bos=*/true);
  GenerateOptions o = options;
  if (o.eos) o.eos = stop_token(tok, engine.config());
  // Text goes out as soon as its tokens are accepted (several at once after a speculative
  // step); the decoder holds back bytes of a character split across tokens.
  text::StreamingDecoder stream(tok, /*skip_special=*/true);
  std::string all_text;
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
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
    j["prefill_tokens_per_s"] = m.prefill_tokens_per_s();
    j["decode_tokens_per_s"] = m.decode_tokens_per_s();
    j["draft"] = o.draft_tokens;
    j["drafted"] = m.drafted;
    j["accepted"] = m.accepted;
    j["acceptance_by_position"] = m.acceptance_by_position();
    j["mean_accepted_length"] = m.mean_accepted_length();
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s\n", rest.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "[%zu prompt tokens, %zu generated; prefill %.1f tokens/s, decode %.2f tokens/s", ids.size(),
               outputs[0].tokens.size(), m.prefill_tokens_per_s(), m.decode_tokens_per_s());
  if (o.draft_tokens > 0)
    std::fprintf(stderr, "; acceptance %.3f, mean accepted length %.2f", m.acceptance_rate(), m.mean_accepted_length());
  std::fprintf(stderr, "]\n");
  return 0;
}

}  // namespace dsv4::cli
