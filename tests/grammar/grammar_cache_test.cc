// The process-wide cache of compiled grammars: one compilation per (text, vocabulary), shared
// between callers and threads; errors are reported every time, never cached; bounded.
#include <gtest/gtest.h>

#include <thread>

#include "grammar/gbnf_compose.h"
#include "grammar/grammar_cache.h"

namespace dsv4::grammar {
namespace {

std::shared_ptr<const TokenVocabulary> letters_vocabulary() {
  auto v = std::make_shared<TokenVocabulary>();
  v->bytes = {"<eos>", "a", "b", "ab", "{", "}", "\""};
  v->special = {1, 0, 0, 0, 0, 0, 0};
  v->eos = 0;
  return v;
}

TEST(GrammarCache, TheSameTextAndVocabularyCompileOnce) {
  clear_grammar_cache();
  const auto vocab = letters_vocabulary();
  const auto first = compile_grammar_cached("root ::= \"a\"+", vocab);
  const auto again = compile_grammar_cached("root ::= \"a\"+", vocab);
  EXPECT_EQ(first.get(), again.get());
  const auto other = compile_grammar_cached("root ::= \"b\"+", vocab);
  EXPECT_NE(first.get(), other.get());
  // Another vocabulary object (even an equal one) is another compilation: masks are per vocabulary.
  const auto elsewhere = compile_grammar_cached("root ::= \"a\"+", letters_vocabulary());
  EXPECT_NE(first.get(), elsewhere.get());
  const GrammarCacheStats s = grammar_cache_stats();
  EXPECT_EQ(s.compiles, 3);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_GT(s.bytes, 0u);
}

TEST(GrammarCache, ErrorsAreReportedEveryTimeAndNotCached) {
  clear_grammar_cache();
  const auto vocab = letters_vocabulary();
  for (int i = 0; i < 2; ++i) {
    try {
      compile_grammar_cached("root ::= undefined-rule", vocab);
      FAIL() << "expected a GrammarError";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find("undefined-rule"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(grammar_cache_stats().compiles, 2);
  EXPECT_EQ(grammar_cache_stats().entries, 0u);
}

TEST(GrammarCache, ConcurrentCallersShareOneCompilation) {
  clear_grammar_cache();
  const auto vocab = letters_vocabulary();
  const std::string gbnf = "root ::= \"{\" ( \"a\" | \"b\" )* \"}\"";
  std::vector<std::shared_ptr<const CompiledGrammar>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = compile_grammar_cached(gbnf, vocab); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g.get(), got[0].get());
  EXPECT_EQ(grammar_cache_stats().compiles, 1);
}

TEST(GrammarCache, HoldsAtMostItsBoundDroppingTheLeastRecentlyUsed) {
  clear_grammar_cache();
  const auto vocab = letters_vocabulary();
  const auto kept = compile_grammar_cached("root ::= \"a\"", vocab);
  for (size_t i = 0; i < kGrammarCacheEntries + 8; ++i) {
    compile_grammar_cached("root ::= \"b\"{" + std::to_string(i + 1) + "}", vocab);
    compile_grammar_cached("root ::= \"a\"", vocab);  // used again and again: stays
  }
  EXPECT_EQ(grammar_cache_stats().entries, kGrammarCacheEntries);
  EXPECT_EQ(compile_grammar_cached("root ::= \"a\"", vocab).get(), kept.get());
  const int64_t compiles = grammar_cache_stats().compiles;
  compile_grammar_cached("root ::= \"b\"{1}", vocab);  // the oldest: dropped, compiled again
  EXPECT_EQ(grammar_cache_stats().compiles, compiles + 1);
}

TEST(GbnfCompose, PrefixesRuleNamesButNotLiteralsClassesOrCounts) {
  const std::string g = "root ::= item{2,3} \"root\" [a-z0-9_] # item comment\nitem ::= \"\\\"x\" | [\\]a-] root-2\nroot-2 ::= \"y\"\n";
  EXPECT_EQ(gbnf_prefixed(g, "p-"),
            "p-root ::= p-item{2,3} \"root\" [a-z0-9_] # item comment\np-item ::= \"\\\"x\" | [\\]a-] p-root-2\n"
            "p-root-2 ::= \"y\"\n");
  const Grammar both = parse_gbnf(gbnf_alternatives({"root ::= \"a\" x\nx ::= \"b\"", "root ::= x\nx ::= \"{\" \"}\""}));
  EXPECT_TRUE(grammar_accepts(both, "ab"));
  EXPECT_TRUE(grammar_accepts(both, "{}"));
  EXPECT_FALSE(grammar_accepts(both, "a{}"));
}

}  // namespace
}  // namespace dsv4::grammar
