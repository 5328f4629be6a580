// The parser of JSON Schema `pattern`s: pattern text → Re (regex_ast.h, which documents the
// subset it reads). Everything outside that subset throws UnsupportedSchema naming the
// construct and where it sits.
#include <optional>

#include "grammar/json_schema_detail.h"
#include "grammar/regex_ast.h"

namespace dsv4::grammar::detail {
namespace {

// Patterns come with requests: bound the recursion of parsing and rewriting them.
constexpr int kMaxGroupDepth = 32;
constexpr size_t kMaxPatternLength = 4096;  // code points

const CodeRanges kDigit{{'0', '9'}};
const CodeRanges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodeRanges kSpace{{'\t', '\r'}, {' ', ' '}};
const CodeRanges kPrintableAscii{{0x20, 0x7E}};

CodeRanges minus(const CodeRanges& a, const CodeRanges& b) {
  // a ∩ complement(b); both normalized.
  const CodeRanges nb = complement(b);
  CodeRanges out;
  for (const CodeRange& x : a)
    for (const CodeRange& y : nb) {
      const uint32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return normalize(out);
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, std::string where) : where_(std::move(where)) {
    while (!pattern.empty()) {
      uint32_t cp = 0;
      const size_t n = decode_utf8(pattern, cp);
      if (n == 0) fail("invalid UTF-8");
      s_.push_back(cp);
      pattern.remove_prefix(n);
    }
    if (s_.size() > kMaxPatternLength) unsupported("longer than " + std::to_string(kMaxPatternLength) + " characters");
  }

  // The whole pattern, unanchored sides padded with `any_char*`.
  Re parse(const std::function<std::string()>& any_char) {
    auto pad = [&] { return repeat(Re{Re::kRule, {}, any_char(), {}, 1, 1}, 0, -1); };
    std::vector<Re> branches;
    for (;;) {
      const bool anchored_start = eat('^');
      bool anchored_end = false;
      Re body = parse_sequence(/*top=*/true, &anchored_end);
      const bool empty_body = body.kind == Re::kSeq && body.kids.empty();
      std::vector<Re> parts;
      if (!anchored_start) parts.push_back(pad());
      parts.push_back(std::move(body));
      if (!anchored_end && !(empty_body && !anchored_start)) parts.push_back(pad());  // one pad for ""
      branches.push_back(seq(std::move(parts)));
      if (!eat('|')) break;
    }
    if (i_ < s_.size()) fail("unmatched ')'");
    return branches.size() == 1 ? branches[0] : alt(std::move(branches));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UnsupportedSchema("JSON Schema keyword 'pattern' at " + at(where_) + ": " + what + " (at character " +
                            std::to_string(i_ + 1) + ")");
  }
  [[noreturn]] void unsupported(const std::string& what) const { fail("unsupported regular expression " + what); }

  bool more() const { return i_ < s_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : 0; }
  bool eat(uint32_t c) {
    if (more() && s_[i_] == c) return ++i_, true;
    return false;
  }

  Re parse_alternatives() {
    std::vector<Re> branches{parse_sequence(false, nullptr)};
    while (eat('|')) branches.push_back(parse_sequence(false, nullptr));
    return branches.size() == 1 ? branches[0] : alt(std::move(branches));
  }

  // Items up to '|', ')' or the end. At the top level a '$' before '|' or the end anchors it.
  Re parse_sequence(bool top, bool* anchored_end) {
    std::vector<Re> items;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        if (top && (i_ + 1 == s_.size() || peek(1) == '|')) {
          ++i_;
          *anchored_end = true;
          break;
        }
        unsupported("anchor '$' before the end of the pattern");
      }
      if (peek() == '^') unsupported("anchor '^' after the start of the pattern");
      Re atom = parse_atom();
      items.push_back(parse_quantifiers(std::move(atom)));
    }
    return items.size() == 1 ? items[0] : seq(std::move(items));
  }

  // {n}, {n,} or {n,m} at i_: their bounds, else nullopt (a literal '{').
  std::optional<std::pair<int, int>> brace_quantifier(size_t& end) const {
    size_t j = i_ + 1;
    auto number = [&](int& v) {
      const size_t b = j;
      long long n = 0;
      while (j < s_.size() && s_[j] >= '0' && s_[j] <= '9') n = std::min(n * 10 + (s_[j++] - '0'), 1000000LL);
      v = int(n);
      return j > b;
    };
    int lo = 0, hi = 0;
    if (!number(lo)) {
      if (j < s_.size() && s_[j] == ',') unsupported("quantifier '{,m}' (read differently by JavaScript and Python)");
      return std::nullopt;
    }
    hi = lo;
    if (j < s_.size() && s_[j] == ',') {
      ++j;
      if (!number(hi)) hi = -1;
    }
    if (j >= s_.size() || s_[j] != '}') return std::nullopt;
    end = j + 1;
    return std::make_pair(lo, hi);
  }

  Re parse_quantifiers(Re atom) {
    int min = 1, max = 1;
    if (peek() == '*' || peek() == '+' || peek() == '?') {
      min = peek() == '+' ? 1 : 0;
      max = peek() == '?' ? 1 : -1;
      ++i_;
    } else if (peek() == '{') {
      size_t end = 0;
      const auto q = brace_quantifier(end);
      if (!q) return atom;
      std::tie(min, max) = *q;
      if (max >= 0 && max < min) fail("quantifier {" + std::to_string(min) + "," + std::to_string(max) + "} has max < min");
      if (min > kMaxRepeat || max > kMaxRepeat) unsupported("repetition count above " + std::to_string(kMaxRepeat));
      i_ = end;
    } else {
      return atom;
    }
    if (eat('+')) unsupported("possessive quantifier");
    eat('?');  // lazy: the same language
    size_t end = 0;
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && brace_quantifier(end)))
      fail("quantifier after a quantifier (nothing to repeat)");
    return repeat(std::move(atom), min, max);
  }

  Re parse_atom() {
    const uint32_t c = s_[i_++];
    switch (c) {
      case '(': return parse_group();
      case '[': return chars(parse_class());
      case '.': return chars(normalize({{0, 0x9}, {0xB, 0xC}, {0xE, 0x2027}, {0x202A, 0x10FFFF}}));
      case '\\': return chars(parse_escape(false, nullptr));
      case '*': case '+': case '?': --i_; fail("nothing to repeat");
      case '{': {
        --i_;
        size_t end = 0;
        if (brace_quantifier(end)) fail("nothing to repeat");
        ++i_;
        return chars({{c, c}});
      }
      default: return chars({{c, c}});
    }
  }

  Re parse_group() {
    if (++depth_ > kMaxGroupDepth) unsupported("nesting of more than " + std::to_string(kMaxGroupDepth) + " groups");
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '=' || peek() == '!') {
        unsupported("lookahead '(?" + std::string(1, char(peek())) + "'");
      } else if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
        unsupported("lookbehind");
      } else if (peek() == '<' || (peek() == 'P' && peek(1) == '<')) {  // named group
        while (more() && peek() != '>') ++i_;
        if (!eat('>')) fail("unterminated group name");
      } else if (peek() == 'P' && peek(1) == '=') {
        unsupported("backreference '(?P='");
      } else {
        unsupported("group '(?" + std::string(1, char(peek())) + "' (inline flags?)");
      }
    }
    Re inner = parse_alternatives();
    if (!eat(')')) fail("missing ')'");
    --depth_;
    return inner;
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const uint32_t h = peek();
      const int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10) : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
      if (d < 0) fail("bad hexadecimal escape");
      v = v * 16 + uint32_t(d);
      ++i_;
    }
    return v;
  }

  uint32_t unicode_escape() {  // after "\u"
    uint32_t v = 0;
    if (eat('{')) {
      int n = 0;
      while (more() && peek() != '}' && n < 8) v = v * 16 + hex_digits(1), ++n;
      if (!eat('}') || n == 0) fail("bad \\u{...} escape");
    } else {
      v = hex_digits(4);
      if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {  // a surrogate pair
        const size_t save = i_;
        i_ += 2;
        const uint32_t low = hex_digits(4);
        if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00);
        i_ = save;
      }
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) unsupported("escape of a lone surrogate or beyond U+10FFFF");
    return v;
  }

  // After '\': the characters the escape stands for. In a class, \b is backspace; a negated
  // shorthand (\D \W \S) sets *negated_shorthand.
  CodeRanges parse_escape(bool in_class, bool* shorthand) {
    if (!more()) fail("pattern ends with '\\'");
    const uint32_t e = s_[i_++];
    auto mark = [&] {
      if (shorthand) *shorthand = true;
    };
    switch (e) {
      case 'd': mark(); return kDigit;
      case 'w': mark(); return kWord;
      case 's': mark(); return kSpace;
      case 'D': mark(); return minus(kPrintableAscii, kDigit);
      case 'W': mark(); return minus(kPrintableAscii, kWord);
      case 'S': mark(); return minus(kPrintableAscii, kSpace);
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case 'x': { const uint32_t v = hex_digits(2); return {{v, v}}; }
      case 'u': { const uint32_t v = unicode_escape(); return {{v, v}}; }
      case '0':
        if (peek() >= '0' && peek() <= '9') unsupported("octal escape");
        return {{0, 0}};
      case 'c': {
        const uint32_t l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) fail("bad \\c escape");
        ++i_;
        return {{l % 32, l % 32}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        unsupported("word boundary '\\b'");
      case 'B': unsupported("word boundary '\\B'");
      case 'k': unsupported("backreference '\\k'");
      case 'p': case 'P': unsupported("Unicode property escape '\\" + std::string(1, char(e)) + "'");
      default: break;
    }
    if (e >= '1' && e <= '9') unsupported("backreference '\\" + std::string(1, char(e)) + "'");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) unsupported("escape '\\" + std::string(1, char(e)) + "'");
    return {{e, e}};  // escaped punctuation (or any other character) stands for itself
  }

  CodeRanges parse_class() {  // after '['
    const bool negated = eat('^');
    if (peek() == ']') unsupported("class starting with ']' (read differently by JavaScript and Python)");
    CodeRanges set;
    bool shorthand = false;
    for (;;) {
      if (!more()) fail("missing ']'");
      if (eat(']')) break;
      bool item_shorthand = false;
      CodeRanges lo = class_atom(&item_shorthand);
      shorthand |= item_shorthand;
      if (!item_shorthand && peek() == '-' && peek(1) != ']' && i_ + 1 < s_.size()) {
        ++i_;
        bool hi_shorthand = false;
        const CodeRanges hi = class_atom(&hi_shorthand);
        if (hi_shorthand) unsupported("class range ending in a shorthand like \\d");
        if (hi[0].lo < lo[0].lo) fail("class range out of order");
        lo = {{lo[0].lo, hi[0].lo}};
      }
      set.insert(set.end(), lo.begin(), lo.end());
    }
    set = normalize(set);
    if (negated) {
      // [^\d] would include Unicode digits that Python's \d (and so [^\d]) excludes.
      set = shorthand ? minus(kPrintableAscii, set) : complement(set);
    }
    if (set.empty()) fail("character class that matches no character");
    return set;
  }

  CodeRanges class_atom(bool* shorthand) {
    const uint32_t c = s_[i_++];
    if (c == '\\') return parse_escape(true, shorthand);
    if (c == '[' && (peek() == ':' || peek() == '=' || peek() == '.')) unsupported("POSIX class '[:...:]'");
    return {{c, c}};
  }

  std::vector<uint32_t> s_;
  size_t i_ = 0;
  int depth_ = 0;  // open groups
  std::string where_;
};

}  // namespace

Re parse_pattern(std::string_view pattern, const std::function<std::string()>& any_char, const std::string& where) {
  return RegexParser(pattern, where).parse(any_char);
}

}  // namespace dsv4::grammar::detail
