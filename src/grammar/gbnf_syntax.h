// The syntax tree of GBNF text (grammar.h lists the syntax), before lowering to elements.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace dsv4::grammar::gbnf {

struct Node;
using Seq = std::vector<Node>;      // a sequence
using Alts = std::vector<Seq>;      // alternatives
struct Node {
  enum Kind { kLiteral, kClass, kRef, kGroup } kind = kLiteral;
  std::string literal;              // UTF-8 bytes
  CodeRanges cls;                   // kClass: code point ranges (sorted, disjoint)
  std::string ref;                  // kRef: rule name
  std::shared_ptr<Alts> group;      // kGroup
  int min = 1, max = 1;             // repetition; max < 0: unbounded
  int line = 0;
};

// The rules in the order written; throws GrammarError naming the line and column of a syntax error.
std::vector<std::pair<std::string, Alts>> parse_rules(std::string_view text);

}  // namespace dsv4::grammar::gbnf
