// Compiled grammars shared by the requests of a process.
//
// Compiling a grammar walks the whole vocabulary once per stack top: 0.1–1 s against a 129k
// vocabulary, longer than many requests take to decode. Clients repeat the same schema
// (a tool set, a response format) request after request, so the same GBNF text against the same
// vocabulary is compiled once and shared (a CompiledGrammar is immutable but for its own
// mutex-guarded mask cache, so sharing it between sequences is safe).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "grammar/token_grammar.h"

namespace dsv4::grammar {

// The grammar `gbnf` compiled against `vocab`, from the cache when the same text was compiled
// against the same vocabulary object before. Thread-safe: concurrent calls for the same key
// compile once (the others wait). Throws GrammarError (not cached: every call reports it).
// The cache holds up to kGrammarCacheEntries grammars and about kGrammarCacheBytes of masks,
// least recently used dropped first (callers holding one keep it alive).
std::shared_ptr<const CompiledGrammar> compile_grammar_cached(const std::string& gbnf,
                                                              std::shared_ptr<const TokenVocabulary> vocab);

inline constexpr size_t kGrammarCacheEntries = 32;
inline constexpr size_t kGrammarCacheBytes = size_t(1) << 30;

// Cache figures (tests, metrics).
struct GrammarCacheStats {
  size_t entries = 0, bytes = 0;
  int64_t hits = 0, compiles = 0;
};
GrammarCacheStats grammar_cache_stats();
void clear_grammar_cache();  // tests

}  // namespace dsv4::grammar
