#include "grammar_args.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/chat_vocabulary.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema.h"

namespace dsv4::cli {

namespace {

std::string read_file(const std::string& path, const char* what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  DSV4_CHECK(std::filesystem::exists(status), path, ": cannot read the ", what, " (no such file)");
  DSV4_CHECK(std::filesystem::is_regular_file(status), path, ": cannot read the ", what, " (not a file)");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  DSV4_CHECK(in.good() || in.eof(), path, ": cannot read the ", what);
  return text.str();
}

}  // namespace

void add_grammar_options(CLI::App* cmd, GrammarArgs& args) {
  auto* schema = cmd->add_option("--json-schema", args.json_schema_file,
                                 "constrain the output to JSON valid against the JSON Schema in this file "
                                 "(the subset the README lists)");
  auto* gbnf = cmd->add_option("--grammar", args.grammar_file, "constrain the output to the GBNF grammar in this file");
  schema->excludes(gbnf);
}

std::string load_output_grammar(const GrammarArgs& a) {
  if (!a.any()) return "";
  const std::string& file = a.file();
  try {
    if (!a.grammar_file.empty()) {
      std::string gbnf = read_file(file, "grammar");
      grammar::parse_gbnf(gbnf);  // reports syntax errors now, before the model loads
      return gbnf;
    }
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(read_file(file, "JSON Schema"));
    } catch (const nlohmann::json::exception& e) {
      throw Error(cat("not JSON: ", e.what()));
    }
    std::string gbnf = grammar::json_schema_to_gbnf(schema);
    grammar::parse_gbnf(gbnf);
    return gbnf;
  } catch (const grammar::GrammarError& e) {
    throw Error(cat(file, ": ", e.what()));
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.starts_with(file + ": ") ? what : cat(file, ": ", what));
  }
}

std::shared_ptr<const grammar::CompiledGrammar> compile_output_grammar(const std::string& gbnf, const std::string& file,
                                                                       const text::Tokenizer& tokenizer,
                                                                       const ModelConfig& config, int32_t eos) {
  try {
    auto vocab = grammar::chat_vocabulary(tokenizer, int32_t(config.vocab_size), eos, /*dsml_markup_as_text=*/false);
    return grammar::compile_grammar_cached(gbnf, std::move(vocab));
  } catch (const grammar::GrammarError& e) {
    throw Error(cat(file, ": ", e.what()));
  }
}

void add_mask_metrics(nlohmann::json& j, const grammar::GrammarMask& mask) {
  const auto& k = mask.counters();
  j["grammar_masks"] = k.masks;
  j["grammar_mask_us_mean"] = k.masks ? 1e6 * k.seconds / double(k.masks) : 0.0;
  j["grammar_mask_us_median"] = k.percentile_us(0.5);  // (bucket edges: within 19%)
  j["grammar_mask_us_p99"] = k.percentile_us(0.99);
  j["grammar_mask_us_max"] = 1e6 * k.max_seconds;
}

}  // namespace dsv4::cli
