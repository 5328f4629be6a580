// Arbitrary bytes through tokenize -> detokenize (the checked-in toy tokenizer: byte-level BPE
// with the DeepSeek pre-tokenizer regexes and special tokens). Valid UTF-8 must round-trip
// exactly — unless it holds an added token that strips the whitespace beside it (lstrip/rstrip,
// as Hugging Face does: that whitespace is gone) — and invalid UTF-8 must fail with TokenizerError. The same bytes read as token ids
// decode (whole and streamed) or fail with TokenizerError naming the id.
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

using namespace dsv4::text;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::load(DSV4_TEST_DATA "/tokenizer/toy_tokenizer.json",
                                             DSV4_TEST_DATA "/tokenizer/toy_tokenizer_config.json");
  return t;
}

// The contents of the added tokens that strip whitespace beside them.
const std::vector<std::string>& stripping_tokens() {
  static const std::vector<std::string> tokens = [] {
    std::ifstream f(DSV4_TEST_DATA "/tokenizer/toy_tokenizer.json");
    const nlohmann::json j = nlohmann::json::parse(f);
    std::vector<std::string> out;
    for (const auto& t : j["added_tokens"])
      if (t.value("lstrip", false) || t.value("rstrip", false)) out.push_back(t["content"].get<std::string>());
    return out;
  }();
  return tokens;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = tokenizer();
  const std::string_view text = dsv4::fuzz::as_text(data, size);
  const bool valid = !first_invalid_utf8(text).has_value();
  try {
    const std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false);
    FUZZ_CHECK(valid, "invalid UTF-8 was tokenized");
    bool strips = false;
    for (const std::string& t : stripping_tokens()) strips |= text.find(t) != std::string_view::npos;
    FUZZ_CHECK(strips || tok.decode(ids) == text, "decode(encode(text)) != text");
  } catch (const TokenizerError&) {
    FUZZ_CHECK(!valid, "valid UTF-8 was refused");
  }
  // The bytes as ids (little-endian int32).
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  for (bool skip : {false, true}) {
    std::string whole;
    bool whole_ok = true;
    try {
      whole = tok.decode(ids, skip);
    } catch (const TokenizerError&) {
      whole_ok = false;
    }
    StreamingDecoder stream(tok, skip);
    std::string streamed;
    bool stream_ok = true;
    try {
      for (int32_t id : ids) streamed += stream.push(id);
      streamed += stream.flush();
    } catch (const TokenizerError&) {
      stream_ok = false;
    }
    FUZZ_CHECK(whole_ok == stream_ok, "streamed and whole decoding disagree on validity");
    FUZZ_CHECK(!whole_ok || whole == streamed, "streamed text differs from the whole decoding");
  }
  return 0;
}
