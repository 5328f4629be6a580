// Mask cost of structured output on a real vocabulary.
//
// For five JSON schemas of growing size: compile time (the vocabulary walk per stack top),
// then the time of each mask the decoder asks for (GrammarMask::allowed_tokens: matcher
// advance and the mask, a bitmap over the vocabulary) along generated documents — each token drawn
// at random among the allowed ones, favouring tokens that close strings and containers so the
// documents finish. Prints per-token median, p90 and p99 in microseconds.
//
// usage: grammar_bench <tokenizer.json> [documents per schema (default 40)] [schema number: only that one]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "grammar/grammar_mask.h"
#include "grammar/json_schema.h"
#include "grammar/tokenizer_vocabulary.h"

using namespace dsv4;
using nlohmann::json;

namespace {

json schemas[] = {
    json::parse(R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false})"),
    json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},
      "email":{"type":"string","format":"email"}},"required":["name","age"],"additionalProperties":false})"),
    json::parse(R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"array","maxItems":7,"items":{"type":"object",
      "properties":{"date":{"type":"string","format":"date"},"high":{"type":"number"},"low":{"type":"number"},
      "sky":{"enum":["sunny","cloudy","rain","snow"]}},"required":["date","high","low","sky"],"additionalProperties":false}}},
      "required":["city","days"],"additionalProperties":false})"),
    json::parse(R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"created":{"type":"string","format":"date-time"},
      "customer":{"$ref":"#/$defs/person"},"items":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"object","properties":{
      "sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},"qty":{"type":"integer","minimum":1,"maximum":99},"price":{"type":"number"}},
      "required":["sku","qty","price"],"additionalProperties":false}},"status":{"enum":["new","paid","shipped"]},
      "notes":{"anyOf":[{"type":"string","maxLength":80},{"type":"null"}]}},"required":["id","created","customer","items","status"],
      "additionalProperties":false,"$defs":{"person":{"type":"object","properties":{"name":{"type":"string","maxLength":40},
      "phone":{"type":"string","pattern":"^\\+?[0-9 ]{7,15}$"}},"required":["name"],"additionalProperties":false}}})"),
    json::parse(R"({"type":"object","properties":{"root":{"$ref":"#/$defs/node"},"meta":{"type":"object","properties":{
      "version":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4},
      "flags":{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"},"c":{"type":"null"}},"additionalProperties":false}},
      "required":["version"],"additionalProperties":false}},"required":["root","meta"],"additionalProperties":false,
      "$defs":{"node":{"type":"object","properties":{"name":{"type":"string","maxLength":16},"value":{"anyOf":[{"type":"integer"},
      {"type":"string","maxLength":8},{"type":"boolean"}]},"children":{"type":"array","maxItems":3,"items":{"$ref":"#/$defs/node"}}},
      "required":["name"],"additionalProperties":false}}})"),
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <tokenizer.json> [documents per schema] [schema number]\n", argv[0]);
    return 2;
  }
  const int documents = argc > 2 ? std::atoi(argv[2]) : 40;
  const size_t only = argc > 3 ? size_t(std::atoi(argv[3])) : 0;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const auto tokenizer = text::Tokenizer::load(argv[1], "");
  auto with_eos = std::make_shared<grammar::TokenVocabulary>(*grammar::vocabulary_of(tokenizer, tokenizer.vocab_size()));
  if (with_eos->eos < 0) with_eos->eos = tokenizer.token_id("<｜end▁of▁sentence｜>").value_or(-1);  // no config given
  const std::shared_ptr<const grammar::TokenVocabulary> vocab = with_eos;
  std::printf("vocabulary: %d tokens\n", vocab->size());
  std::printf("%-8s %8s %6s %10s %8s %10s %8s %8s %8s %8s %6s\n", "schema", "gbnf B", "tops", "uncertain", "sets MB",
              "compile s", "tokens", "med us", "p90 us", "p99 us", "done");
  std::mt19937 rng(1);
  std::vector<uint64_t> allowed(mask_words(size_t(vocab->size())));
  for (size_t si = 0; si < std::size(schemas); ++si) {
    if (only && si + 1 != only) continue;
    const std::string gbnf = grammar::json_schema_to_gbnf(schemas[si]);
    const auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), vocab);
    std::vector<double> us;
    int finished = 0;
    for (int d = 0; d < documents; ++d) {
      grammar::GrammarMask mask(g);
      std::vector<int32_t> context = {0};
      mask.begin(0, 1);
      for (int step = 0; step < 400; ++step) {
        const auto t0 = std::chrono::steady_clock::now();
        mask.allowed_tokens(0, context, allowed);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        std::vector<int32_t> ids, closing;
        for (int32_t t = 0; t < vocab->size(); ++t)
          if (is_allowed(allowed, size_t(t))) {
            ids.push_back(t);
            const std::string& b = vocab->bytes[size_t(t)];
            if (b.find_first_of("\"]}") != std::string::npos || t == vocab->eos) closing.push_back(t);
          }
        if (ids.empty()) break;
        const auto& from = !closing.empty() && rng() % 3 == 0 ? closing : ids;
        const int32_t t = from[rng() % from.size()];
        if (t == vocab->eos) {
          ++finished;
          break;
        }
        context.push_back(t);
      }
    }
    std::printf("%-8zu %8zu %6zu %10zu %8.1f %10.3f %8zu %8.1f %8.1f %8.1f %3d/%d\n", si + 1, gbnf.size(), g->stack_tops(),
                g->uncertain_total(), double(g->memory_bytes()) / 1e6, g->compile_seconds(), us.size(), percentile(us, 0.5),
                percentile(us, 0.9), percentile(us, 0.99), finished, documents);
  }
}
