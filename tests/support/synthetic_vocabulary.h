// A byte vocabulary for the tiny test checkpoints (which have no tokenizer), shaped like a
// BPE one for structured output: EOS and two other special tokens, every printable ASCII
// byte, JSON pieces that span several grammar symbols ("\":", "},"), tokens that split a UTF-8
// character, and seeded random fragments of JSON's alphabet for the rest of the ids.
#pragma once
#include <memory>
#include <random>
#include <string>

#include "grammar/token_grammar.h"

namespace dsv4::test {

constexpr int32_t kVocabEos = 0, kVocabThinkEnd = 1, kVocabOtherSpecial = 2;
constexpr int32_t kVocabFirstAscii = 3;  // id of ' ' (0x20); printable ASCII c is kVocabFirstAscii + c - 0x20

inline std::shared_ptr<const grammar::TokenVocabulary> synthetic_vocabulary(int64_t V) {
  auto v = std::make_shared<grammar::TokenVocabulary>();
  v->bytes.resize(size_t(V));
  v->special.assign(size_t(V), 0);
  for (int32_t s : {kVocabEos, kVocabThinkEnd, kVocabOtherSpecial}) v->special[size_t(s)] = 1;
  v->eos = kVocabEos;
  int32_t id = kVocabFirstAscii;
  for (int c = 0x20; c < 0x7f; ++c) v->bytes[size_t(id++)] = std::string(1, char(c));
  for (const char* s : {"{\"", "\":", "\",", "\"}", "},", "}]", "[{", "true", "false", "null", "12", "-0", ".5",
                        "\n", "\n  ", "  ", ",\"", "\"a", "\"b", "\"c", "ab", "é", "\xC3", "\xA9", "[]", "{}", "1,", "0}",
                        "-", "20", "T1", ":0", "Z", "@", ".com", "e+"})
    v->bytes[size_t(id++)] = s;
  const std::string alphabet = "{}[]\",:0123456789abcteruflsn .-\n";
  std::mt19937 rng(5);
  for (; id < V; ++id) {
    std::string s;
    for (size_t n = 2 + rng() % 3; s.size() < n;) s += alphabet[rng() % alphabet.size()];
    v->bytes[size_t(id)] = s;
  }
  return v;
}

}  // namespace dsv4::test
