// --json-schema FILE / --grammar FILE (generate, chat): constrained output. The file is read and
// turned into a grammar before the model loads, so that a bad file fails at once; the grammar is
// compiled against the checkpoint's tokenizer and masked with the model's vocabulary size.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "grammar/grammar_mask.h"
#include "io/config.h"
#include "text/tokenizer.h"

namespace dsv4::cli {

struct GrammarArgs {
  std::string json_schema_file, grammar_file;
  bool any() const { return !json_schema_file.empty() || !grammar_file.empty(); }
  const std::string& file() const { return json_schema_file.empty() ? grammar_file : json_schema_file; }
};

// Adds the two (mutually exclusive) options to `cmd`.
void add_grammar_options(CLI::App* cmd, GrammarArgs& args);

// The GBNF text the options ask for ("" for none), checked. Throws Error "FILE: what is wrong"
// (unreadable, not JSON, an unsupported JSON Schema keyword, a GBNF syntax error...).
std::string load_output_grammar(const GrammarArgs& args);

// `gbnf` compiled against the model's vocabulary (`eos` ends the output once the grammar is
// complete); masks for it are grammar::GrammarMask(compiled, options). Throws Error naming `file`
// when it does not compile.
std::shared_ptr<const grammar::CompiledGrammar> compile_output_grammar(const std::string& gbnf, const std::string& file,
                                                                       const text::Tokenizer& tokenizer,
                                                                       const ModelConfig& config, int32_t eos);

// generate --json: what the masks cost in the run (grammar_masks, grammar_mask_us_mean / _median /
// _p99 / _max: every position under the grammar, drafts included, matcher steps included).
void add_mask_metrics(nlohmann::json& j, const grammar::GrammarMask& mask);

}  // namespace dsv4::cli
