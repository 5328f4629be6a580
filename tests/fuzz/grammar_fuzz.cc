// The grammar compilers: input that is JSON goes through the JSON Schema converter, anything
// else is GBNF text. What compiles is matched against a small vocabulary: the token masks must
// equal a brute-force check of every token, and strings the grammar accepts byte by byte must
// be accepted token by token too. Compilation may refuse input only with a GrammarError.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_validator.h"
#include "grammar/token_grammar.h"

using namespace dsv4;
using namespace dsv4::grammar;

namespace {

std::shared_ptr<const TokenVocabulary> vocabulary() {
  static const auto v = [] {
    auto v = std::make_shared<TokenVocabulary>();
    v->bytes.push_back("");  // EOS
    v->special.push_back(1);
    v->eos = 0;
    for (int c = 0x20; c < 0x7f; ++c) v->bytes.push_back(std::string(1, char(c)));
    for (const char* s : {"\n", "{\"", "\":", "\",", "},", "true", "null", "12", "\xC3", "\xA9", "é", "  ", "ab"})
      v->bytes.push_back(s);
    v->special.resize(v->bytes.size(), 0);
    return v;
  }();
  return v;
}

void walk(std::shared_ptr<const CompiledGrammar> compiled, const nlohmann::json& j, const std::string& text);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // grammars this long only slow the search
  const std::string text(fuzz::as_text(data, size));
  std::string gbnf = text;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  Grammar g;
  try {
    if (!j.is_discarded()) gbnf = json_schema_to_gbnf(j);
    g = parse_gbnf(gbnf);
  } catch (const GrammarError&) {
    return 0;
  }
  if (g.terminal_count() > 2000) return 0;
  // Compiling and matching may give up on a grammar too ambiguous to follow, only with a GrammarError.
  try {
    walk(std::make_shared<CompiledGrammar>(std::move(g), vocabulary(), 1), j, text);
  } catch (const GrammarError&) {
  }
  return 0;
}

namespace {

void walk(std::shared_ptr<const CompiledGrammar> compiled, const nlohmann::json& j, const std::string& text) {
  TokenMatcher m(compiled);
  std::vector<uint64_t> bits(compiled->mask_words());
  const auto& v = *vocabulary();
  // Where a schema's grammar completes, its text is a value the schema's validator accepts (the
  // converter's rule: every text the grammar accepts validates; oneOf is read as anyOf there).
  const bool validate = !j.is_discarded() && text.find("oneOf") == std::string::npos;
  std::string output;
  for (int step = 0; step < 24; ++step) {  // a walk that takes the first allowed token each time
    if (validate && m.complete()) {
      const nlohmann::json value = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
      FUZZ_CHECK(!value.is_discarded(), "a complete JSON Schema output is not JSON");
      FUZZ_CHECK(!json_schema_violation(j, value), "a complete JSON Schema output breaks its schema");
      break;
    }
    m.fill_mask(bits);
    int32_t next = -1;
    for (int32_t t = 0; t < v.size(); ++t) {
      const bool in_mask = (bits[size_t(t) >> 6] >> (t & 63)) & 1;
      FUZZ_CHECK(in_mask == m.allows(t), "a token mask differs from the brute-force check");
      if (in_mask && next < 0 && t != v.eos) next = t;
    }
    if (next < 0) break;
    FUZZ_CHECK(m.accept(next), "a token in the mask is refused");
    output += v.bytes[size_t(next)];
  }
}

}  // namespace
