// The token-level matcher: its precomputed masks against a brute-force check of every token
// from the live stacks, along random walks with rollbacks; EOS and special tokens by rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "grammar/json_schema.h"
#include "grammar/stack_automaton.h"
#include "grammar/token_grammar.h"
#include "allocation_counter.h"

namespace dsv4::grammar {
namespace {

// A small vocabulary shaped like a BPE one: EOS and another special token, every printable
// byte, pieces that span several grammar symbols ("\":", "},", "\"}"), keywords, and tokens
// that split a UTF-8 character.
std::shared_ptr<TokenVocabulary> toy_vocabulary() {
  auto v = std::make_shared<TokenVocabulary>();
  auto add = [&](const std::string& s, bool special = false) {
    v->bytes.push_back(s);
    v->special.push_back(special);
  };
  add("<eos>", true);
  add("</think>", true);
  v->eos = 0;
  for (int c = 0x20; c < 0x7f; ++c) add(std::string(1, char(c)));
  for (const char* s : {"{\"", "\":", "\",", "\"}", "},", "}]", "[{", "true", "false", "null", "tr", "ue", "12", "-0",
                        ".5", "e+", "\n", "\n  ", "  ", "\t", ",\"", "\"a", "ab", "é", "\xC3", "\xA9", "😀", "\xF0\x9F",
                        "\x98\x80", "\\n", "\\u00", "\"\"", "[]", "{}", "1,", "0}", "\"\n",
                        "((((", "[[[[", "([([", ")))", "]]]]", ")])", "))))))))", "x)))", "x]])"})
    add(s);
  return v;
}

const char* kJsonish = R"(
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,4} )? ( [eE] [-+]? [0-9]{1,2} )?
ws     ::= ( " " | "\n" [ \t]{0,4} )?
)";

// Bounded repetitions of a multi-byte item: up to 128 copies get rules of their own (exact
// compile-time masks), longer ones share one item (uncertain tokens checked at run time).
const char* kBounded = R"(
root  ::= "{" short "," long "," word "}"
char  ::= [^"\\\x00-\x1f] | "\\" ["\\/n]
short ::= "\"" char{2,40} "\""
long  ::= "\"" char{0,140} "\""
word  ::= [a-z] [a-z0-9]{0,130}
)";

// Nesting deeper than the frames a mask keeps below a checked top (TokenMatcher::kCutDepth = 6),
// with tokens that close 1 to 8 levels at once: a mask of the cut stacks serves every depth
// when no check reaches the cut, and is computed from the full stacks when one does.
const char* kNested = R"g(
root ::= e
e    ::= "(" e ")" | "[" e "]" | "x"
)g";

struct MaskCase {
  const char* name;
  const char* grammar;
  size_t walk_above;  // stacks with more uncertain tokens than this take the whole-vocabulary walk
  int max_tokens;     // a walk starts over past this many tokens
  bool deep = false;  // nests deeper than the cut: all three cut paths must be taken
};
// walk_above 0: always walk — that path too must give the brute-force mask.
class MaskPaths : public ::testing::TestWithParam<MaskCase> {};
INSTANTIATE_TEST_SUITE_P(TokenGrammar, MaskPaths,
                         ::testing::Values(MaskCase{"json", kJsonish, 2048, 60}, MaskCase{"json_walked", kJsonish, 0, 60},
                                           MaskCase{"bounded", kBounded, 2048, 300},
                                           MaskCase{"bounded_walked", kBounded, 0, 300},
                                           MaskCase{"nested", kNested, 2048, 400, true}),
                         [](const ::testing::TestParamInfo<MaskCase>& info) { return std::string(info.param.name); });

TEST_P(MaskPaths, MasksEqualABruteForceCheckOfEveryTokenAlongRandomWalks) {
  const auto vocab = toy_vocabulary();
  const auto g = std::make_shared<CompiledGrammar>(parse_gbnf(GetParam().grammar), vocab, 2);
  EXPECT_GT(g->uncertain_total(), 0u);  // tokens spanning rule ends exist in this vocabulary
  TokenMatcher m(g);
  m.set_walk_above(GetParam().walk_above);
  std::mt19937 rng(7);
  std::vector<uint64_t> bits(g->mask_words());
  int checked = 0, rollbacks = 0, completions = 0;
  for (int step = 0; step < 3000; ++step) {
    m.fill_mask(bits);
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < vocab->size(); ++t) {
      const bool in_mask = (bits[size_t(t) >> 6] >> (t & 63)) & 1;
      ASSERT_EQ(in_mask, m.allows(t)) << "token " << t << " '" << vocab->bytes[size_t(t)] << "' after "
                                       << m.accepted() << " tokens";
      if (in_mask) allowed.push_back(t);
      ++checked;
    }
    if (allowed.empty() || m.finished()) {  // done: start over
      ++completions;
      m.reset();
      continue;
    }
    if (m.accepted() > 3 && rng() % 8 == 0) {
      m.rollback(1 + rng() % 3);
      ++rollbacks;
      continue;
    }
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept(t));
    if (int(m.accepted()) > GetParam().max_tokens) m.reset();
  }
  EXPECT_GT(rollbacks, 100);
  EXPECT_GT(completions, 5);
  EXPECT_GT(checked, 100000);
  if (GetParam().deep) {
    const TokenMatcher::CutStats& cuts = m.cut_stats();
    EXPECT_GT(cuts.cut_computed, 20);  // masks of cut stacks...
    EXPECT_GT(cuts.cut_cached, 20);    // ...reused at other depths
    EXPECT_GT(cuts.cut_reached, 5);    // a check that needed the frames below the cut
  }
}

// More states than the mask cache holds: a literal of 1500 characters cycling through 62 with
// step 7. The first walk fills the cache and replaces its oldest entries (their map nodes and
// slab slots reused); stepping back 300 characters finds the newest cached; a second walk
// recomputes the replaced ones. Every mask, cached or computed, equals the brute force.
TEST(TokenGrammar, TheMaskCacheReplacesItsOldestEntriesExactly) {
  const std::string alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string text;
  for (int k = 0; k < 1500; ++k) text += alnum[size_t(k * 7) % alnum.size()];
  const auto vocab = toy_vocabulary();
  const auto g = std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"" + text + "\""), vocab, 2);
  TokenMatcher m(g);
  std::vector<uint64_t> bits(g->mask_words());
  auto walk_to_the_end = [&] {
    while (m.accepted() < text.size()) {
      m.fill_mask(bits);
      for (int32_t t = 0; t < vocab->size(); ++t)
        ASSERT_EQ(is_allowed(bits, size_t(t)), m.allows(t)) << "token '" << vocab->bytes[size_t(t)] << "' at " << m.accepted();
      const auto single = std::find(vocab->bytes.begin(), vocab->bytes.end(), std::string(1, text[m.accepted()]));
      ASSERT_TRUE(m.accept(int32_t(single - vocab->bytes.begin())));
    }
  };
  walk_to_the_end();
  const int64_t stored = g->masks_cached();
  EXPECT_GT(stored, int64_t(CompiledGrammar::kMaxCachedMasks) + 400);  // the oldest were replaced
  m.rollback(300);
  walk_to_the_end();
  EXPECT_EQ(g->masks_cached(), stored);  // the newest 300 came from the cache
  m.reset();
  walk_to_the_end();
  EXPECT_GT(g->masks_cached(), stored + 400);  // the replaced ones computed again, in full slots
}

// A sequence's new tokens append to the matcher's history instead of allocating a set each:
// 4000 tokens (with draft-like rollbacks and re-advances) allocate a few times in all, where
// a set per token would allocate thousands of times.
TEST(TokenGrammar, AcceptRollbackAndMaskAllocateNothingPerToken) {
  const auto vocab = toy_vocabulary();
  const auto g = std::make_shared<CompiledGrammar>(parse_gbnf(R"(root ::= "\"" [a-z]* "\"")"), vocab, 2);
  TokenMatcher m(g);
  std::vector<uint64_t> bits(g->mask_words());
  const auto id = [&](const char* s) { return int32_t(std::find(vocab->bytes.begin(), vocab->bytes.end(), s) - vocab->bytes.begin()); };
  ASSERT_TRUE(m.accept(id("\"")));
  test::AllocationCounter count;
  for (int i = 0; i < 4000; ++i) {
    m.fill_mask(bits);
    if (!m.accept(id(i % 2 ? "ab" : "a"))) break;
    if (i % 7 == 6) {  // a rejected draft: roll back and go on
      m.rollback(3);
      for (int j = 0; j < 3; ++j) m.accept(id("a"));
    }
  }
  const int64_t allocations = count.stop();
  EXPECT_EQ(m.accepted(), 1u + 4000);
  EXPECT_LT(allocations, 80) << "allocations over 4000 tokens";
}

// Inside a repetition of up to 128 copies every position's continuation is known at compile
// time, so the string's characters leave nothing to check at run time; past 128 copies the item
// is shared and tokens that run past its end are uncertain.
TEST(TokenGrammar, BoundedRepetitionsUpTo128CopiesAreClassifiedAtCompileTime) {
  const auto vocab = toy_vocabulary();
  auto uncertain = [&](const char* gbnf) {
    return CompiledGrammar(parse_gbnf(gbnf), vocab, 1).uncertain_total();
  };
  EXPECT_EQ(uncertain(R"(root ::= "\"" ( [a-z] | "\\" "n" ){0,100} "\"")"), 0u);
  EXPECT_GT(uncertain(R"(root ::= "\"" ( [a-z] | "\\" "n" ){0,200} "\"")"), 0u);
}

// Lowering gives small rules a copy where they are used and leaves the originals unreachable; a
// reference from an unreachable rule is no caller. Counted as one, it made the rule after an
// optional property look called from two places, so every token running past a string's end
// (`a"}`) was left to run-time checks (453 here; 2,939 for the same schema on the 129k vocabulary).
TEST(TokenGrammar, RulesOnlyUnreachableRulesCallHaveKnownReturns) {
  const auto vocab = toy_vocabulary();
  for (const char* s : {"a\"", "b\"}", "c\"\n"}) {  // a name's last letter and what follows it
    vocab->bytes.push_back(s);
    vocab->special.push_back(0);
  }
  // (optional "email" before the required "name": its group is a small rule lowering copies)
  const std::string gbnf = json_schema_to_gbnf(nlohmann::json::parse(R"({"type": "object", "properties": {
      "age": {"type": "integer"}, "email": {"type": "string", "format": "email"}, "name": {"type": "string", "maxLength": 40}},
      "required": ["age", "name"], "additionalProperties": false})"));
  EXPECT_EQ(CompiledGrammar(parse_gbnf(gbnf), vocab, 1).uncertain_total(), 0u) << gbnf;
}

// The automaton's steps are the stepper's, also after it forgets its states (budget 8).
TEST(StackAutomaton, StepsEqualTheStackMatcherAndSurviveForgetting) {
  const Grammar g = parse_gbnf(kJsonish);
  StackStepper step(g);
  StackAutomaton automaton(step, 8);
  std::mt19937 rng(3);
  const std::string alphabet = "{}[]\",:0123456789.-eE+ \ntrufalsn\\u";
  int accepted = 0, rejected = 0, forgot = 0;
  for (int trial = 0; trial < 300; ++trial) {
    forgot += automaton.forget_if_full();
    StackSet start;
    step.start(start);
    uint32_t state = automaton.state_of(start);
    StackMatcher reference(g);  // (a rejected byte leaves it unchanged)
    std::string text;
    for (int tries = 0; tries < 200 && text.size() < 30; ++tries) {
      const char c = alphabet[rng() % alphabet.size()];
      const uint32_t next = automaton.next(state, uint8_t(c));
      const bool ok = reference.advance(uint8_t(c));
      ASSERT_EQ(next != StackAutomaton::kDead, ok) << "'" << c << "' after '" << text << "'";
      if (!ok) {
        ++rejected;
        continue;
      }
      state = next;
      text += c;
      ++accepted;
    }
  }
  EXPECT_GT(rejected, 2000);
  EXPECT_GT(accepted, 2000);
  EXPECT_GT(forgot, 10);
}

TEST(TokenGrammar, EosOnlyWhenCompleteAndSpecialTokensNeverText) {
  const auto vocab = toy_vocabulary();
  const auto g = std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"{\" \"}\""), vocab, 1);
  TokenMatcher m(g);
  EXPECT_FALSE(m.allows(0));  // EOS before the root completes
  EXPECT_FALSE(m.allows(1));  // a special token is never text, whatever its bytes
  EXPECT_TRUE(m.accept(2 + ('{' - 0x20)));
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept(2 + ('}' - 0x20)));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.finished());  // nothing can follow: no trailing whitespace, only EOS
  std::vector<uint64_t> bits(g->mask_words());
  m.fill_mask(bits);
  for (int32_t t = 0; t < vocab->size(); ++t) EXPECT_EQ((bits[size_t(t) >> 6] >> (t & 63)) & 1, uint64_t(t == 0)) << t;
  EXPECT_TRUE(m.accept(0));
  EXPECT_FALSE(m.allows(2 + ('{' - 0x20)));
  m.fill_mask(bits);  // after EOS: only EOS (rows after a drafted EOS are verified, then dropped)
  for (int32_t t = 0; t < vocab->size(); ++t) EXPECT_EQ((bits[size_t(t) >> 6] >> (t & 63)) & 1, uint64_t(t == 0)) << t;
  EXPECT_TRUE(m.accept(0));
  m.rollback(1);
  m.rollback(2);
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.allows(2 + ('}' - 0x20)));
}

TEST(TokenGrammar, TokensSplittingACharacterAreMatchedByteWise) {
  const auto vocab = toy_vocabulary();
  const auto g = std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"\\\"\" [é😀]+ \"\\\"\""), vocab, 1);
  TokenMatcher m(g);
  auto id = [&](const std::string& s) {
    for (int32_t t = 0; t < vocab->size(); ++t)
      if (vocab->bytes[size_t(t)] == s && !vocab->special[size_t(t)]) return t;
    return -1;
  };
  ASSERT_TRUE(m.accept(id("\"")));
  EXPECT_TRUE(m.accept(id("\xC3")));   // the first byte of é
  EXPECT_FALSE(m.allows(id("\"")));    // not between the bytes of a character
  EXPECT_FALSE(m.allows(id("\xF0\x9F")));
  EXPECT_TRUE(m.accept(id("\xA9")));
  EXPECT_TRUE(m.accept(id("\xF0\x9F")));
  EXPECT_TRUE(m.accept(id("\x98\x80")));
  EXPECT_TRUE(m.accept(id("\"")));
  EXPECT_TRUE(m.complete());
}

}  // namespace
}  // namespace dsv4::grammar
