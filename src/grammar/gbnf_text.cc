// GBNF text for literals, character classes and JSON string characters, and the fixed rules of
// JSON (json_schema_detail.h). Everything is written in ASCII with the grammar's escapes, so the
// text survives any transport.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "grammar/json_schema_detail.h"

namespace dsv4::grammar::detail {
namespace {

std::string hex(uint32_t v, int digits, bool upper) {
  char buf[16];
  std::snprintf(buf, sizeof buf, upper ? "%0*X" : "%0*x", digits, unsigned(v));
  return buf;
}

// One code point in GBNF literal or class syntax.
void put_code_point(std::string& out, uint32_t cp, bool in_class) {
  switch (cp) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
  }
  if (in_class && (cp == ']' || cp == '[' || cp == '-' || cp == '^')) {
    out += '\\';
    out += char(cp);
  } else if (cp < 0x20 || cp == 0x7F) {
    out += "\\x" + hex(cp, 2, true);
  } else if (cp < 0x80) {
    out += char(cp);
  } else if (cp <= 0xFFFF) {
    out += "\\u" + hex(cp, 4, true);
  } else {
    out += "\\U" + hex(cp, 8, true);
  }
}

std::string class_text(const CodeRanges& set, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const CodeRange& r : set) {
    put_code_point(out, r.lo, true);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    put_code_point(out, r.hi, true);
  }
  return out + "]";
}

bool contains(const CodeRanges& set, uint32_t cp) {
  for (const CodeRange& r : set)
    if (cp >= r.lo && cp <= r.hi) return true;
  return false;
}

}  // namespace

std::string gbnf_literal(std::string_view utf8) {
  std::string out = "\"";
  while (!utf8.empty()) {
    uint32_t cp = 0;
    const size_t n = decode_utf8(utf8, cp);
    if (n == 0) throw UnsupportedSchema("JSON Schema: invalid UTF-8 in a string of the schema");
    put_code_point(out, cp, false);
    utf8.remove_prefix(n);
  }
  return out + "\"";
}

std::string gbnf_class(const CodeRanges& set) {
  const CodeRanges others = complement(set);
  // Negated classes also exclude surrogates (never characters), so they say the same.
  return others.size() < set.size() ? class_text(others, true) : class_text(set, false);
}

std::string json_escaped(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x20) return "\\u" + hex(cp, 4, false);
  std::string out;
  append_utf8(out, cp);
  return out;
}

std::string json_char_expr(const CodeRanges& set) {
  std::vector<std::string> alts;
  // Characters JSON writes as they are: all but '"', '\' and the controls U+0000-U+001F.
  CodeRanges raw;
  for (const CodeRange& r : set) {
    uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
    if (lo > r.hi) continue;
    for (const uint32_t special : {uint32_t('"'), uint32_t('\\')}) {
      if (special < lo || special > r.hi) continue;
      if (special > lo) raw.push_back({lo, special - 1});
      lo = special + 1;
    }
    if (lo <= r.hi) raw.push_back({lo, r.hi});
  }
  if (!raw.empty()) alts.push_back(gbnf_class(normalize(raw)));
  if (contains(set, '"')) alts.push_back(gbnf_literal("\\\""));
  if (contains(set, '\\')) alts.push_back(gbnf_literal("\\\\"));
  // Controls: the short escapes where JSON has them, else \u00XX (lowercase hex, as most
  // serializers write it).
  std::string short_escapes;
  std::string long_escapes[2];  // last hex digits of \u000X and \u001X
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!contains(set, c)) continue;
    const std::string e = json_escaped(c);
    if (e.size() == 2) short_escapes += e[1];
    else long_escapes[c >> 4] += e.back();
  }
  if (short_escapes.size() == 1) alts.push_back(gbnf_literal("\\" + short_escapes));
  if (short_escapes.size() > 1) alts.push_back(gbnf_literal("\\") + " [" + short_escapes + "]");
  for (int high = 0; high < 2; ++high) {
    const std::string& lows = long_escapes[high];
    if (lows.empty()) continue;
    const std::string prefix = gbnf_literal("\\u00" + std::to_string(high));
    alts.push_back(lows.size() == 1 ? gbnf_literal("\\u00" + std::to_string(high) + lows) : prefix + " [" + lows + "]");
  }
  if (alts.empty()) throw UnsupportedSchema("JSON Schema: empty character set");  // callers check first
  if (alts.size() == 1 && alts[0].find(' ') == std::string::npos) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

std::string gbnf_repeat(const std::string& item, int min, int max) {
  if (max == 0) return "";
  if (min == 1 && max == 1) return item;
  if (min == 0 && max == 1) return item + "?";
  if (max < 0) {
    if (min == 0) return item + "*";
    if (min == 1) return item + "+";
    return item + "{" + std::to_string(min) + ",}";
  }
  if (min == max) return item + "{" + std::to_string(min) + "}";
  return item + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

std::string alternatives(const std::vector<std::string>& alts) {
  std::string s;
  for (const std::string& a : alts) s += (s.empty() ? "" : " | ") + a;
  return s;
}

bool is_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
  return true;
}

const std::vector<BuiltinRule>& builtin_rules() {
  static const std::vector<BuiltinRule> kBuiltins = {
      {"ws", R"(( " " | "\n" [ \t]{0,20} )?)", {}},
      {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"number", R"("-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?)", {}},
      {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))", {}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      {"value", "object | array | string | number | boolean | null", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" ws ( member ( ws "," ws member )* ws )? "}")", {"ws", "member"}},
      {"member", R"(string ws ":" ws value)", {"string", "ws", "value"}},
      {"array", R"("[" ws ( value ( ws "," ws value )* ws )? "]")", {"ws", "value"}},
      // Formats: the string's content.
      {"date", R"(year "-" month-day | leap-year "-02-29")", {"year", "month-day", "leap-year"}},
      {"year", R"([0-9]{4})", {}},
      {"month-day",
       R"(( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ))",
       {}},
      // Divisible by 4 and not by 100, or by 400.
      {"leap-year", R"([0-9] [0-9] ( "0" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00")", {}},
      {"time", R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [-+] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))", {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"uuid", R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})", {}},
      {"email", R"(email-atom ( "." email-atom ){0,3} "@" ( email-label "." ){1,3} [a-zA-Z]{2,24})", {"email-atom", "email-label"}},
      {"email-atom", R"([a-zA-Z0-9] [a-zA-Z0-9_+-]{0,31})", {}},
      {"email-label", R"([a-zA-Z0-9]{1,20} ( "-" [a-zA-Z0-9]{1,20} ){0,3})", {}},
      {"ipv4", R"(ipv4-octet "." ipv4-octet "." ipv4-octet "." ipv4-octet)", {"ipv4-octet"}},
      {"ipv4-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])", {}},
  };
  return kBuiltins;
}

std::string object_layout(const std::vector<std::string>& kv, const std::vector<bool>& required,
                          const std::function<std::string(const std::string&, const std::string&)>& rule) {
  const size_t n = kv.size();
  size_t first_required = n;
  for (size_t i = 0; i < n && first_required == n; ++i)
    if (required[i]) first_required = i;
  if (std::all_of(required.begin(), required.end(), [](bool r) { return r; })) {
    std::string b = R"("{" ws )" + kv[0];
    for (size_t i = 1; i < n; ++i) b += R"( ws "," ws )" + kv[i];
    return b + R"( ws "}")";
  }
  // rest[j]: members j..n-1 after at least one was written, each behind its comma (a chain of
  // rules, so the text stays linear in n).
  std::vector<std::string> rest(n + 1);
  for (size_t j = n - 1; j >= 1; --j) {
    const std::string item = R"(ws "," ws )" + kv[j];
    std::string b = required[j] ? item : "( " + item + " )?";
    if (!rest[j + 1].empty()) b += " " + rest[j + 1];
    rest[j] = rule("rest-" + std::to_string(j), b);
  }
  // The first member written is an optional one before the first required, or that one: no
  // comma before it, none missing after it.
  std::string members;
  const size_t firsts = std::min(first_required + 1, n);
  for (size_t k = 0; k < firsts; ++k) members += (k ? " | " : "") + kv[k] + (rest[k + 1].empty() ? "" : " " + rest[k + 1]);
  if (firsts > 1) members = "( " + members + " )";
  if (first_required < n) return R"("{" ws )" + members + R"( ws "}")";
  return R"("{" ws ( )" + members + R"( ws )? "}")";
}

std::string array_layout(const std::vector<std::string>& prefix, const std::string& extra, int min, int max) {
  if (max == 0) return R"("[" ws "]")";
  const int k = int(prefix.size());
  // The items after the prefix, each behind its comma.
  std::string tail;
  if (!extra.empty()) {
    const std::string more = R"(( ws "," ws )" + extra + " )";
    if (k == 0) tail = gbnf_repeat(more, std::max(min - 1, 0), max < 0 ? -1 : max - 1);
    else if (max < 0 || max > k) tail = gbnf_repeat(more, std::max(min - k, 0), max < 0 ? -1 : max - k);
  }
  // Prefix items from the end: item i (behind its comma) and what may follow it; optional from
  // minItems on (JSON Schema allows arrays shorter than the prefix).
  for (int i = k - 1; i >= 1; --i) {
    std::string item = R"(ws "," ws )" + prefix[size_t(i)] + (tail.empty() ? "" : " " + tail);
    tail = i < min ? item : "( " + item + " )?";
  }
  const std::string first = (k > 0 ? prefix[0] : extra) + (tail.empty() ? "" : " " + tail);
  if (min > 0) return R"("[" ws )" + first + R"( ws "]")";
  return R"("[" ws ( )" + first + R"( ws )? "]")";
}

}  // namespace dsv4::grammar::detail
