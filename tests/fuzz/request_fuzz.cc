// HTTP request bodies -> request validation of /v1/chat/completions, /v1/completions,
// /v1/messages (Anthropic) and /v1/responses (OpenAI), the last two through their conversion to
// a chat request (the toy tokenizer renders and encodes the prompt). A body is accepted or answered with an
// ApiError (400 naming the field); an accepted request's prompt ids are inside the vocabulary.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "server/anthropic_api.h"
#include "server/openai_protocol.h"
#include "server/responses_api.h"

using namespace dsv4;

namespace {

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer t = text::Tokenizer::load(DSV4_TEST_DATA "/tokenizer/toy_tokenizer.json",
                                                         DSV4_TEST_DATA "/tokenizer/toy_tokenizer_config.json");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const text::Tokenizer& tok = tokenizer();
  const int64_t vocab = tok.vocab_size();
  nlohmann::ordered_json body;
  try {
    body = server::parse_body(std::string(fuzz::as_text(data, size)));
  } catch (const server::ApiError& e) {
    FUZZ_CHECK(e.status() == 400, "a malformed body is not a 400");
    return 0;
  }
  for (int endpoint = 0; endpoint < 4; ++endpoint) {
    try {
      const server::GenerationRequest r =
          endpoint == 0   ? server::parse_chat_request(body, tok, vocab)
          : endpoint == 1 ? server::parse_completion_request(body, tok, vocab)
          : endpoint == 2 ? server::parse_chat_request(server::chat_body_from_messages(body, false), tok, vocab)
                          : server::parse_chat_request(server::chat_body_from_responses(body), tok, vocab);
      for (int32_t id : r.prompt) FUZZ_CHECK(id >= 0 && id < vocab, "an accepted prompt id is outside the vocabulary");
      FUZZ_CHECK(!r.max_tokens || *r.max_tokens >= 0, "negative max_tokens accepted");
    } catch (const server::ApiError& e) {
      FUZZ_CHECK(e.status() >= 400 && e.status() < 500, "a bad request is not a 4xx");
      const std::string json = e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      (void)json;
    }
  }
  return 0;
}
