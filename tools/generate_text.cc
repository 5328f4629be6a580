#include "generate_text.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar_args.h"
#include "metrics_report.h"
#include "engine/model_tokenizer.h"

namespace dsv4::cli {

void warn_incomplete(const OutputGrammar& grammar) {
  std::fprintf(stderr, "dsv4: warning: the output was cut by --max-new-tokens before it completed the grammar of %s\n",
               grammar.file.c_str());
}

int generate_text(Engine& engine, const std::string& prompt, const GenerateOptions& options, bool json,
                  int64_t prefill_chunk, const ContextLimit* limit, const OutputGrammar* grammar,
                  ProgressMeter* meter, const std::function<void(nlohmann::json&)>& report) {
  const text::Tokenizer tok = load_model_tokenizer(engine.files->dir, engine.config());
  const std::vector<int32_t> ids = tok.encode(prompt, /*add_bos=*/true);
  GenerateOptions o = options;
  if (limit) limit->apply(int64_t(ids.size()), o, "generate");
  if (o.eos) o.eos = stop_token(tok, engine.config());
  std::unique_ptr<grammar::GrammarMask> mask;
  if (grammar) {
    DSV4_CHECK(o.eos, "--ignore-eos cannot be combined with --json-schema / --grammar: the output ends where the "
                      "grammar is complete");
    mask = std::make_unique<grammar::GrammarMask>(
        compile_output_grammar(grammar->gbnf, grammar->file, tok, engine.config(), *o.eos));
    o.mask = mask.get();
  }
  // Text goes out as soon as its tokens are accepted (several at once after a speculative
  // step); the decoder holds back bytes of a character split across tokens.
  text::StreamingDecoder stream(tok, /*skip_special=*/true);
  std::string all_text;
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  decoder.set_prefill_chunk(prefill_chunk);
  if (meter) meter->watch_prefill(decoder);
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
  const bool complete = !mask || mask->complete(outputs[0].tokens);
  if (json) {
    nlohmann::json j;
    j["text"] = all_text;
    if (mask) {
      j["grammar_complete"] = complete;
      add_mask_metrics(j, *mask);
    }
    if (!complete) warn_incomplete(*grammar);
    j["prompt_tokens"] = ids;
    j["tokens"] = outputs[0].tokens;
    add_metrics(j, m, {o.draft_tokens, o.draft_auto}, decoder.scheduler());
    j["backend"] = engine.backend->name();
    if (report) report(j);
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s\n", rest.c_str());
  std::fflush(stdout);
  if (!complete) warn_incomplete(*grammar);
  std::fprintf(stderr, "[%zu prompt tokens, %zu generated; %s]\n", ids.size(), outputs[0].tokens.size(),
               metrics_line(m, {o.draft_tokens, o.draft_auto}).c_str());
  return 0;
}

}  // namespace dsv4::cli
