// Grammars for constrained decoding: a GBNF-like text compiled to a byte-level grammar.
//
// Syntax (llama.cpp's GBNF, which users know):
//   name ::= alternatives          one rule; `root` is where matching starts
//   a b c                          sequence        a | b      alternatives     ( ... )  group
//   "text"                         literal (escapes \" \\ \n \r \t \/ \xHH \uHHHH \UHHHHHHHH)
//   [a-z_] [^"\\]                  character class (code points; the same escapes, plus \] \- \^)
//   .                              any character
//   x? x* x+ x{n} x{n,} x{n,m}     repetition
//   # comment                      to the end of the line
// A rule's body runs until the next `name ::=`. Literals and classes are Unicode code points,
// matched as their UTF-8 bytes, so a token may end or begin inside a character.
//
// Compiled, a grammar is a flat array of elements (rule references and byte sets, each rule a
// list of alternatives) that a pushdown matcher walks (grammar_matcher.h). Left recursion and
// repetition of something that can match nothing are refused at compile time: the matcher
// expands rules eagerly and would not terminate.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace dsv4::grammar {

// A grammar the engine cannot compile: the message names the rule, line or construct.
class GrammarError : public Error {
 public:
  explicit GrammarError(const std::string& what) : Error(what) {}
};

// 256 bits: the bytes an element accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(uint8_t(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { kEndOfAlternative, kEndOfRule, kRuleRef, kBytes };
  Kind kind;
  uint32_t value;  // kRuleRef: rule index; kBytes: index into Grammar::byte_sets
};

class Grammar {
 public:
  // Rules: elements[rule_begin[r] ...]: alternative, kEndOfAlternative, ..., alternative, kEndOfRule.
  std::vector<Element> elements;
  std::vector<uint32_t> rule_begin;
  std::vector<std::string> rule_names;
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;

  const Element& at(uint32_t pos) const { return elements[pos]; }
  bool ends_alternative(uint32_t pos) const { return elements[pos].kind <= Element::kEndOfRule; }
  // Positions of each alternative's first element of rule r.
  std::vector<uint32_t> alternatives(uint32_t rule) const;
  size_t terminal_count() const;  // kBytes elements: the matcher's possible stack tops
};

// Compiles GBNF text; throws GrammarError naming what is wrong (undefined rule, syntax error at
// line:column, left recursion, no `root`).
Grammar parse_gbnf(std::string_view text);

// The characters of a GBNF rule name.
inline bool is_gbnf_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Whole-string checks (tests, validation of inputs): does the grammar match all of `text`,
// or can `text` be continued to a match?
bool grammar_accepts(const Grammar& g, std::string_view text);
bool grammar_accepts_prefix(const Grammar& g, std::string_view text);

}  // namespace dsv4::grammar
