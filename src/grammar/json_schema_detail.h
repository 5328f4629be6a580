// Pieces of the JSON Schema converter (json_schema.cc) that stand alone: GBNF text for literals
// and character sets, integer ranges, regular expressions, allOf merging, and reading keywords.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/utf8_ranges.h"

namespace dsv4::grammar::detail {

using ojson = nlohmann::ordered_json;

// Repetition counts above this are not written out (the compiled grammar would hold one rule per
// count): larger maxLength / maxItems are lowered to it (documented in json_schema.h).
inline constexpr int kMaxRepeat = 10000;

// ---- GBNF text (gbnf_text.cc)

// A GBNF literal matching exactly the UTF-8 text `utf8` (escaped; non-ASCII as \u / \U).
// Throws UnsupportedSchema on invalid UTF-8.
std::string gbnf_literal(std::string_view utf8);
// A GBNF character class matching the code points of `set` (normalized, non-empty); written
// negated when that is shorter.
std::string gbnf_class(const CodeRanges& set);
// How a JSON string spells the character `cp` inside its quotes ("\"" → \", newline → \n, ...).
std::string json_escaped(uint32_t cp);
// A GBNF expression for one character of a JSON string's content drawn from `set`, as JSON
// writes it: unescaped where JSON allows, else its escape sequence. Atomic (a class, a literal
// or a parenthesized group).
std::string json_char_expr(const CodeRanges& set);
// `item` repeated min..max times (max < 0: unbounded) in GBNF suffix syntax: "x", "x?", "x*",
// "x{2,5}"...; `item` must be atomic. Returns "" when max == 0.
std::string gbnf_repeat(const std::string& item, int min, int max);
// The GBNF alternatives `alts` joined by " | ".
std::string alternatives(const std::vector<std::string>& alts);
// Whether `s` is a bare rule name (letters, digits and '-'): a body that needs no rule of its own.
bool is_identifier(const std::string& s);

// The fixed rules of JSON (ws, char, string, number, integer, boolean, null, value, object,
// member, array) and of string formats (date, time, date-time, uuid, email, ipv4 and their
// parts), under these reserved names; `deps` are the rules a body refers to.
struct BuiltinRule {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};
const std::vector<BuiltinRule>& builtin_rules();

// The body of an object rule whose members are the rules kv[i] (each one `"name" ws ":" ws
// value`, n ≥ 1), in this order, kv[i] always present when required[i], else optional: commas
// come out right whichever optional members appear. rule(suffix, body) defines a helper rule
// (named after the object and suffix) and returns its name.
std::string object_layout(const std::vector<std::string>& kv, const std::vector<bool>& required,
                          const std::function<std::string(const std::string&, const std::string&)>& rule);
// The body of an array rule: the rules prefix[i] first, then `extra` ("" for none) for the
// rest, minItems..maxItems in all (max < 0: unbounded; without `extra`, max ≤ prefix.size()).
std::string array_layout(const std::vector<std::string>& prefix, const std::string& extra, int min, int max);

// ---- numbers (integer_range.cc)

// A GBNF expression for the decimal integers in [lo, hi] (lo ≤ hi), written as JSON writes them:
// no leading zeros, no "-0". Exact: accepts each integer of the range and nothing else.
std::string integer_range_gbnf(int64_t lo, int64_t hi);
// The alternatives for an integer (or number) schema's minimum / maximum / exclusiveMinimum /
// exclusiveMaximum (see json_schema.h for what is generated); "" when it has none.
// Throws UnsupportedSchema when no generated value is in range.
std::string bounded_number_gbnf(const ojson& schema, const std::string& where, bool integer);

// ---- regular expressions (regex_to_gbnf.cc, regex_parse.cc; the subset read: regex_ast.h)

// A GBNF expression for the content (between the quotes) of the JSON strings whose decoded
// value matches `pattern` (ECMA-262 / Python subset, unanchored sides padded with `any_char()*`,
// which returns the name of a rule matching one JSON string character; called only when
// needed). Returns "" when only the empty string matches. `where` is the pattern's JSON
// pointer, for errors (UnsupportedSchema).
std::string pattern_to_gbnf(std::string_view pattern, const std::function<std::string()>& any_char, const std::string& where);

// ---- allOf (json_schema_merge.cc)

// Resolves a local $ref (`where`: the pointer of the schema holding it) to the schema it names.
using RefResolver = std::function<const ojson&(const std::string& ref, const std::string& where)>;
// One schema equivalent to all of `parts` holding (allOf, or $ref / anyOf with sibling
// keywords). Throws UnsupportedSchema when the conjunction is not expressible as one schema.
ojson merge_schemas(const std::vector<ojson>& parts, const std::string& where, const RefResolver& resolve);

// ---- reading schemas, shared by the converter's files (json_schema_keywords.cc)

// `where` as written in messages: the JSON pointer, or "(root)".
std::string at(const std::string& where);
// The pointer `where` extended by one key (escaped as RFC 6901 requires).
std::string child(const std::string& where, const std::string& key);
// Percent-decoding of a URI fragment ("#/%24defs/a").
std::string percent_decode(const std::string& s);
// Keywords that never constrain (annotations) and schema containers that hold definitions.
bool is_annotation(const std::string& keyword);
bool is_definitions(const std::string& keyword);
// Whether the converter knows `keyword` (with value `v`); unknown ones are UnsupportedSchema.
bool is_known_keyword(const std::string& keyword, const ojson& v);
// Throws UnsupportedSchema "JSON Schema keyword '<keyword>' at <where>: <what>".
[[noreturn]] void invalid_keyword(const std::string& keyword, const std::string& where, const std::string& what);
// The types schema `s` allows: its `type`, else those whose keywords it uses (minLength:
// string...), else none (any value). "integer" is left out beside "number", which covers it.
// Throws UnsupportedSchema on a malformed `type`.
std::vector<std::string> schema_types(const ojson& s, const std::string& where);
// Whether the JSON value `v` has one of the types `allowed` (an integral float is an integer).
bool has_type(const ojson& v, const std::vector<std::string>& allowed);
// The bounds of a count keyword pair (minLength / maxLength, minItems / maxItems): min..max
// (max < 0: none), max lowered to kMaxRepeat. Throws UnsupportedSchema when a count is not a
// non-negative integer, the range is empty or min itself is above kMaxRepeat.
std::pair<int, int> count_range(const ojson& s, const char* min_key, const char* max_key, const std::string& where);

}  // namespace dsv4::grammar::detail
