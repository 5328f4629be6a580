// Structured-output fuzz driver (run by tests/scripts/structured_output_fuzz.sh, which then
// validates the outputs with an independent JSON Schema validator from npm).
//
// Random schemas × {random-weight, partial-acceptance (mirror)} checkpoints × k = 0..4 ×
// {greedy, sampled} × prompts. Checked here: every output token is allowed by a fresh matcher
// replaying the output (no token the grammar rejects), greedy with drafts == greedy without
// under the same schema, drafts were made and (on the mirror) partly accepted. Written out
// (JSON lines): each case's schema, output text and whether the grammar completed, for the
// validator to parse and check.
//
// usage: dsv4_structured_output_fuzz <out.jsonl> [schemas (default 25)] [seed]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>

#include "grammar/grammar_mask.h"
#include "grammar/json_schema.h"
#include "support/spec_support.h"
#include "support/synthetic_vocabulary.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

using nlohmann::json;

// ---- random schemas: every supported keyword, bounded so that outputs can complete

class SchemaGen {
 public:
  explicit SchemaGen(uint64_t seed) : rng_(seed) {}
  json schema() {
    defs_ = json::object();
    json root = object(0);
    if (!defs_.empty()) root["$defs"] = defs_;
    return root;
  }

 private:
  int pick(int n) { return int(rng_() % uint64_t(n)); }
  bool chance(int percent) { return pick(100) < percent; }

  json object(int depth) {
    json props = json::object(), required = json::array();
    const int n = 1 + pick(3);
    for (int i = 0; i < n; ++i) {
      const std::string name = std::string(1, char('a' + i)) + (chance(30) ? "_x" : "");
      props[name] = value(depth + 1);
      if (chance(60)) required.push_back(name);
    }
    json o = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
    if (!required.empty()) o["required"] = required;
    return o;
  }

  json value(int depth) {
    const int kinds = depth >= 3 ? 8 : 11;
    switch (pick(kinds)) {
      case 0: {
        json s = {{"type", "string"}, {"maxLength", 1 + pick(8)}};
        if (chance(40)) s["minLength"] = pick(2);
        return s;
      }
      case 1: return {{"type", "string"}, {"enum", json::array({"red", "green", "a\"b", "é"})}};
      case 2: {
        json s = {{"type", "integer"}};
        const int lo = pick(200) - 100;
        if (chance(70)) s["minimum"] = lo;
        if (chance(70)) s["maximum"] = lo + pick(300);
        if (chance(20)) s["exclusiveMaximum"] = lo + 301;
        return s;
      }
      case 3: return chance(50) ? json{{"type", "number"}} : json{{"type", "number"}, {"minimum", -5}, {"maximum", 50}};
      case 4: return {{"type", "boolean"}};
      case 5: return chance(50) ? json{{"type", "null"}} : json{{"const", 42}};
      case 6: {
        static const char* formats[] = {"date", "uuid", "email", "date-time"};
        return {{"type", "string"}, {"format", formats[pick(4)]}};
      }
      case 7: return {{"type", "string"}, {"pattern", chance(50) ? "^[a-c]{1,3}-[0-9]{2}$" : "^(yes|no)$"}};
      case 8: {
        json a = {{"type", "array"}, {"items", value(depth + 1)}, {"maxItems", 1 + pick(3)}};
        if (chance(50)) a["minItems"] = pick(2);
        return a;
      }
      case 9: return {{"anyOf", json::array({value(depth + 1), {{"type", "null"}}})}};
      default: {
        const std::string name = "d" + std::to_string(defs_.size());
        defs_[name] = object(depth + 1);
        return {{"$ref", "#/$defs/" + name}};
      }
    }
  }

  std::mt19937_64 rng_;
  json defs_;
};

std::string text_of(const grammar::TokenVocabulary& v, const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens)
    if (!v.special[size_t(t)]) s += v.bytes[size_t(t)];
  return s;
}

int run(const std::string& out_path, int schemas, uint64_t seed) {
  struct Model {
    std::string name;
    std::unique_ptr<Engine> engine;
  };
  Model models[] = {
      {"random", Engine::open(test::generated_checkpoint("fuzz_random", "tiny", 11), {test::test_backend(), true, 0, 16})},
      {"mirror", Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16})}};
  const int64_t V = models[0].engine->config().vocab_size;
  const auto vocab = test::synthetic_vocabulary(V);
  std::ofstream out(out_path);
  SchemaGen gen(seed);
  int64_t cases = 0, completed = 0, failures = 0, drafted = 0, accepted = 0, partial = 0, rolled_back = 0;
  auto fail = [&](const std::string& what) {
    ++failures;
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  };
  for (int si = 0; si < schemas; ++si) {
    const json schema = gen.schema();
    const auto g = std::make_shared<grammar::CompiledGrammar>(grammar::parse_gbnf(grammar::json_schema_to_gbnf(schema)),
                                                              vocab, 0);
    for (Model& m : models) {
      const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(5, V, seed + uint64_t(si) * 7),
                                                         test::random_prompt(9, V, seed + uint64_t(si) * 7 + 1)};
      for (const bool sampled : {false, true}) {
        std::vector<SequenceOutput> reference;
        for (int k = 0; k <= 4; ++k) {
          grammar::GrammarMask mask(g);
          GenerateOptions o;
          o.max_new_tokens = 100;
          o.eos = test::kVocabEos;
          o.mask = &mask;
          o.draft_tokens = k;
          if (sampled) {
            o.sampling.temperature = 1.0f;
            o.sampling.seed = seed + uint64_t(si);
          }
          DecodeMetrics metrics;
          const auto outs = test::generate(*m.engine, prompts, o, &metrics);
          drafted += metrics.drafted;
          accepted += metrics.accepted;
          partial += metrics.partial_steps;
          rolled_back += mask.counters().tokens_rolled_back;
          if (k > 0 && metrics.drafted == 0) fail("no drafts at k = " + std::to_string(k));
          if (!sampled && k == 0) reference = outs;
          for (size_t p = 0; p < outs.size(); ++p) {
            const std::string where = "schema " + std::to_string(si) + " " + m.name + " k=" + std::to_string(k) +
                                      (sampled ? " sampled" : " greedy") + " prompt " + std::to_string(p);
            grammar::TokenMatcher replay(g);
            for (size_t i = 0; i < outs[p].tokens.size(); ++i)
              if (!replay.accept(outs[p].tokens[i])) fail(where + ": token " + std::to_string(i) + " rejected");
            const bool complete = outs[p].stopped_at_eos;
            if (complete && !replay.finished()) fail(where + ": EOS before the grammar completed");
            if (!sampled && k > 0 && outs[p].tokens != reference[p].tokens)
              fail(where + ": greedy with drafts differs from greedy without");
            ++cases;
            completed += complete;
            out << json{{"case", where}, {"schema", schema}, {"complete", complete},
                        {"text", text_of(*vocab, outs[p].tokens)}}
                       .dump(-1, ' ', false, json::error_handler_t::replace)
                << "\n";
          }
        }
      }
    }
  }
  std::printf("%lld cases, %lld completed (validated by the npm validator next), %lld failures; drafted %lld, "
              "accepted %lld, partial steps %lld, tokens rolled back %lld\n",
              (long long)cases, (long long)completed, (long long)failures, (long long)drafted, (long long)accepted,
              (long long)partial, (long long)rolled_back);
  if (completed < cases / 4) fail("fewer than a quarter of the outputs completed: the validator would see little");
  if (partial == 0 || rolled_back == 0) fail("no partial acceptance or rollback under a grammar: that path is untested");
  return failures ? 1 : 0;
}

}  // namespace
}  // namespace dsv4

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <out.jsonl> [schemas] [seed]\n", argv[0]);
    return 2;
  }
  try {
    return dsv4::run(argv[1], argc > 2 ? std::atoi(argv[2]) : 25, argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
