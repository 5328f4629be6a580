// The parsed form of a JSON Schema `pattern`, shared by its parser (regex_parse.cc) and its
// GBNF emitter (regex_to_gbnf.cc), which together make pattern_to_gbnf (json_schema_detail.h).
//
// The subset both ECMA-262 (what JSON Schema specifies) and Python's `re` read the same way:
// literals, escapes (\d \w \s \D \W \S, \n \t \r \f \v \0, \xHH, \uHHHH, \u{H…}, \cX, escaped
// punctuation), classes [...] / [^...], '.', groups (...), (?:...), (?<name>...), alternation,
// quantifiers * + ? {n} {n,} {n,m} (lazy forms read as greedy: same language), '^' at the start
// and '$' at the end of a top-level alternative. Backreferences, lookaround, word boundaries,
// inline flags, Unicode property escapes and possessive quantifiers throw UnsupportedSchema.
//
// Generated text must satisfy every validator, so where engines differ we pick a subset:
//   - \d \w \s are ASCII ([0-9], [A-Za-z0-9_], [\t\n\v\f\r ]); \D \W \S and classes negating
//     them are printable ASCII only (Python's are Unicode-aware and would reject, e.g., "٣").
//   - '.' excludes \n, \r, U+2028 and U+2029 (JavaScript's line terminators; Python: \n).
//   - A pattern matches anywhere in the string (JSON Schema patterns are unanchored), so a side
//     without its anchor is padded with any JSON string characters: `p` means `.*p.*`.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace dsv4::grammar::detail {

struct Re {
  enum Kind { kEmpty, kChars, kRule, kSeq, kAlt, kRepeat } kind = kEmpty;
  CodeRanges chars;          // kChars
  std::string rule;          // kRule: a grammar rule matching one JSON string character
  std::vector<Re> kids;      // kSeq, kAlt; kRepeat: one
  int min = 1, max = 1;      // kRepeat; max < 0: unbounded
};

inline Re chars(CodeRanges c) { return Re{Re::kChars, normalize(std::move(c)), {}, {}, 1, 1}; }
inline Re seq(std::vector<Re> kids) { return Re{Re::kSeq, {}, {}, std::move(kids), 1, 1}; }
inline Re alt(std::vector<Re> kids) { return Re{Re::kAlt, {}, {}, std::move(kids), 1, 1}; }
inline Re repeat(Re kid, int min, int max) { return Re{Re::kRepeat, {}, {}, {std::move(kid)}, min, max}; }

// The whole pattern (the subset above), its unanchored sides padded with `any_char()*` (a rule
// matching one JSON string character; called only when needed). `where` is the pattern's JSON
// pointer, for errors (UnsupportedSchema).
Re parse_pattern(std::string_view pattern, const std::function<std::string()>& any_char, const std::string& where);

}  // namespace dsv4::grammar::detail
