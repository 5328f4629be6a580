// Grammars too ambiguous to follow. In `x ::= "[" x? x? "]" | "a"` every "[" multiplies the
// live parses (the inner x is the first or the second), so matching would take time exponential
// in the depth: a step that would hold more than kMaxParseStacks stacks throws a GrammarError
// instead, and a GrammarMask fails only the sequence that met it (EOS alone from there, error()
// says why). Large stack sets stay sets through their hash index.
#include <gtest/gtest.h>

#include <string>

#include "grammar/grammar_mask.h"
#include "grammar/token_grammar.h"

namespace dsv4::grammar {
namespace {

const char* kTwoOptionalChildren = "root ::= x\nx ::= \"[\" x? x? \"]\" | \"a\"\n";
const char* kOneParsePerDepth = "root ::= x\nx ::= \"[\" x? \"]\" | \"a\"\n";

TEST(AmbiguousGrammar, StackSetsOverTheIndexThresholdStayDistinct) {
  StackSet set;
  std::vector<std::vector<uint32_t>> stacks;
  for (uint32_t i = 0; i < 300; ++i) stacks.push_back({7, 7, i % 17, i});  // shared bottoms, distinct tops
  stacks.push_back({});
  for (int round = 0; round < 2; ++round)
    for (const auto& s : stacks) set.add(s);
  ASSERT_EQ(set.size(), stacks.size());
  for (const auto& s : stacks) EXPECT_TRUE(set.contains(s));
  EXPECT_FALSE(set.contains(std::vector<uint32_t>{7, 7, 3, 301}));
  EXPECT_FALSE(set.contains(std::vector<uint32_t>{7, 3, 3}));
  std::vector<uint32_t> words;
  set.serialize(words);
  StackSet copy;
  copy.assign_serialized(words);
  for (const auto& s : stacks) copy.add(s);  // the restored set is indexed too: nothing new
  EXPECT_EQ(copy.size(), stacks.size());
  copy.clear();
  copy.add(stacks[5]);
  copy.add(stacks[5]);
  EXPECT_EQ(copy.size(), 1u);
}

TEST(AmbiguousGrammar, ExponentiallyManyParsesAreRefusedAtTheLimit) {
  const Grammar g = parse_gbnf(kTwoOptionalChildren);
  StackMatcher m(g);
  size_t largest = 0;
  int bytes = 0;
  try {
    for (; bytes < 64; ++bytes) {
      ASSERT_TRUE(m.advance('['));
      largest = std::max(largest, m.stacks().size());
    }
    FAIL() << "64 brackets matched, " << largest << " stacks at most";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(kMaxParseStacks)), std::string::npos) << e.what();
  }
  EXPECT_GT(largest, kMaxParseStacks / 4) << "refused after " << bytes << " brackets, before the sets grew";
  EXPECT_LT(bytes, 16);

  // One parse per depth: any depth, a few stacks.
  const Grammar nested = parse_gbnf(kOneParsePerDepth);
  StackMatcher n(nested);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(n.advance('['));
  EXPECT_LE(n.stacks().size(), 3u);  // tops "[", "a", "]"
}

TEST(AmbiguousGrammar, AMaskFailsOnlyTheSequenceThatMetTheLimit) {
  auto vocab = std::make_shared<TokenVocabulary>();
  vocab->bytes = {"", "[", "]", "a", "[["};
  vocab->special = {1, 0, 0, 0, 0};
  vocab->eos = 0;
  const int32_t open = 1, close = 2, a = 3;
  auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(kTwoOptionalChildren), vocab, 1);
  GrammarMask mask(compiled);
  std::vector<uint64_t> bits(1);
  auto allowed = [&](size_t sequence, const std::vector<int32_t>& context) {
    mask.allowed_tokens(sequence, context, bits);
    return bits[0];
  };
  auto only = [](std::initializer_list<int32_t> ids) {
    uint64_t b = 0;
    for (int32_t id : ids) b |= uint64_t(1) << id;
    return b;
  };
  mask.begin(0, 1);
  mask.begin(1, 1);
  std::vector<int32_t> deep = {a};  // (the prompt: one token)
  int failed_at = -1;
  for (int depth = 0; depth < 40 && failed_at < 0; ++depth) {
    const uint64_t b = allowed(0, deep);
    if (b == only({0})) failed_at = depth;
    else EXPECT_EQ(b & only({open, a}), only({open, a})) << "depth " << depth;
    deep.push_back(open);
  }
  ASSERT_GT(failed_at, 2);
  EXPECT_NE(mask.error().find("too ambiguous"), std::string::npos) << mask.error();
  // Drafts rolled back below the failure do not revive it: EOS alone.
  EXPECT_EQ(allowed(0, std::vector<int32_t>(deep.begin(), deep.begin() + 3)), only({0}));
  // The other sequence under the same mask goes on.
  EXPECT_EQ(allowed(1, {a, open, a}), only({open, close, a, 4}));
  EXPECT_EQ(allowed(1, {a, open, a, close}), only({0}));  // complete: EOS
  // A sequence begun again starts clean.
  mask.begin(0, 1);
  EXPECT_EQ(allowed(0, {a}), only({open, a, 4}));
}

}  // namespace
}  // namespace dsv4::grammar
