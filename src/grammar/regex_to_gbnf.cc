// JSON Schema `pattern` → GBNF for the string's content (json_schema_detail.h): the pattern is
// parsed (regex_parse.cc; the subset read: regex_ast.h), then written out here.
//
// Characters are emitted as JSON writes them inside a string ('"' as \", newline as \n, ...).
// Repetition of something that can match the empty string, which the matcher refuses, is
// rewritten: X* with X nullable is (X minus the empty string)*.
#include <optional>

#include "grammar/json_schema_detail.h"
#include "grammar/regex_ast.h"

namespace dsv4::grammar::detail {
namespace {

bool nullable(const Re& r) {
  switch (r.kind) {
    case Re::kEmpty: return true;
    case Re::kChars: case Re::kRule: return false;
    case Re::kSeq:
      for (const Re& k : r.kids)
        if (!nullable(k)) return false;
      return true;
    case Re::kAlt:
      for (const Re& k : r.kids)
        if (nullable(k)) return true;
      return false;
    case Re::kRepeat: return r.min == 0 || nullable(r.kids[0]);
  }
  return false;
}

// The language of r without the empty string; nullopt when nothing is left.
std::optional<Re> non_empty(const Re& r) {
  if (!nullable(r)) return r;
  switch (r.kind) {
    case Re::kSeq: {
      // All parts are nullable: the first non-empty part is some i; those before it are empty.
      std::vector<Re> alts;
      for (size_t i = 0; i < r.kids.size(); ++i) {
        std::optional<Re> first = non_empty(r.kids[i]);
        if (!first) continue;
        std::vector<Re> parts{std::move(*first)};
        parts.insert(parts.end(), r.kids.begin() + long(i) + 1, r.kids.end());
        alts.push_back(seq(std::move(parts)));
      }
      if (alts.empty()) return std::nullopt;
      return alts.size() == 1 ? alts[0] : alt(std::move(alts));
    }
    case Re::kAlt: {
      std::vector<Re> alts;
      for (const Re& k : r.kids)
        if (std::optional<Re> n = non_empty(k)) alts.push_back(std::move(*n));
      if (alts.empty()) return std::nullopt;
      return alts.size() == 1 ? alts[0] : alt(std::move(alts));
    }
    case Re::kRepeat: {
      // X{n,m} with X nullable is X'{0,m} (empty copies make up the count), X' = X minus "".
      if (r.max == 0) return std::nullopt;
      std::optional<Re> item = non_empty(r.kids[0]);
      if (!item) return std::nullopt;
      return repeat(std::move(*item), 1, r.max);
    }
    default: return std::nullopt;
  }
}

struct Text {
  std::string s;   // "" = the empty string
  bool atomic;     // usable before a repetition suffix as is
};

std::string group(const std::string& s) { return "( " + s + " )"; }

Text emit(const Re& r);

Text emit_seq(const std::vector<Re>& kids) {
  std::vector<Text> parts;
  std::string literal;  // a run of single characters, JSON-escaped
  auto flush = [&] {
    if (!literal.empty()) parts.push_back({gbnf_literal(literal), true});
    literal.clear();
  };
  for (const Re& k : kids) {
    if (k.kind == Re::kChars && k.chars.size() == 1 && k.chars[0].lo == k.chars[0].hi) {
      literal += json_escaped(k.chars[0].lo);
      continue;
    }
    flush();
    Text t = emit(k);
    if (!t.s.empty()) parts.push_back(std::move(t));
  }
  flush();
  if (parts.size() == 1) return parts[0];
  std::string s;
  for (const Text& p : parts) s += (s.empty() ? "" : " ") + p.s;
  return {s, parts.empty()};
}

Text emit(const Re& r) {
  switch (r.kind) {
    case Re::kEmpty: return {"", true};
    case Re::kChars:
      if (r.chars.size() == 1 && r.chars[0].lo == r.chars[0].hi) return {gbnf_literal(json_escaped(r.chars[0].lo)), true};
      return {json_char_expr(r.chars), true};
    case Re::kRule: return {r.rule, true};
    case Re::kSeq: return emit_seq(r.kids);
    case Re::kAlt: {
      std::vector<Text> alts;
      bool has_empty = false;
      for (const Re& k : r.kids) {
        Text t = emit(k);
        if (t.s.empty()) has_empty = true;
        else alts.push_back(std::move(t));
      }
      if (alts.empty()) return {"", true};
      if (alts.size() == 1 && !has_empty) return alts[0];
      std::string s;
      for (const Text& a : alts) s += (s.empty() ? "" : " | ") + a.s;
      return {group(s) + (has_empty ? "?" : ""), !has_empty};
    }
    case Re::kRepeat: {
      const Re* item = &r.kids[0];
      int min = r.min;
      std::optional<Re> rewritten;
      if (nullable(*item)) {  // the matcher refuses repeating what can match nothing
        rewritten = non_empty(*item);
        if (!rewritten) return {"", true};
        item = &*rewritten;
        min = 0;
      }
      // (X{m,}){n,} with m ≤ 1 is X{n·m,}: one loop instead of nested ones that the matcher
      // would have to follow in every combination.
      while (r.max < 0 && item->kind == Re::kRepeat && item->max < 0 && item->min <= 1) {
        min *= item->min;
        item = &item->kids[0];
      }
      Text t = emit(*item);
      if (t.s.empty()) return {"", true};
      std::string s = gbnf_repeat(t.atomic ? t.s : group(t.s), min, r.max);
      return {s, false};
    }
  }
  return {"", true};
}

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, const std::function<std::string()>& any_char, const std::string& where) {
  return emit(parse_pattern(pattern, any_char, where)).s;
}

}  // namespace dsv4::grammar::detail
