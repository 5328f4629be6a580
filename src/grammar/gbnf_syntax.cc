// GBNF text → syntax tree: a recursive-descent parser (grammar.h lists the syntax).
#include "grammar/gbnf_syntax.h"

#include "grammar/grammar.h"

namespace dsv4::grammar::gbnf {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  std::vector<std::pair<std::string, Alts>> parse() {
    std::vector<std::pair<std::string, Alts>> rules;
    skip_space();
    while (pos_ < s_.size()) {
      const std::string name = parse_name();
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      rule_ = name;
      rules.emplace_back(name, parse_alternatives(false));
      skip_space();
    }
    return rules;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    throw GrammarError(cat("grammar: ", what, " at line ", line, ":", col));
  }
  int line() const {
    int line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    return line;
  }
  void skip_space() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  std::string parse_name() {
    const size_t b = pos_;
    while (pos_ < s_.size() && is_gbnf_name_char(s_[pos_])) ++pos_;
    if (b == pos_) fail("expected a rule name");
    return std::string(s_.substr(b, pos_ - b));
  }
  // Is the text at pos_ the start of the next rule (`name ::=`)?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && is_gbnf_name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\n' || s_[p] == '\r')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  Alts parse_alternatives(bool nested) {
    Alts alts;
    alts.push_back(parse_sequence(nested));
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Seq parse_sequence(bool nested) {
    Seq seq;
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      if (c == '|') break;
      if (c == ')') {
        if (!nested) fail("unmatched ')'");
        break;
      }
      if (!nested && at_rule_start()) break;
      Node n;
      n.line = line();
      if (c == '"') {
        n.kind = Node::kLiteral;
        ++pos_;
        while (pos_ < s_.size() && s_[pos_] != '"') append_utf8(n.literal, parse_char());
        if (pos_ >= s_.size()) fail("unterminated string literal");
        ++pos_;
      } else if (c == '[') {
        n.kind = Node::kClass;
        n.cls = parse_class();
      } else if (c == '.') {
        ++pos_;
        n.kind = Node::kClass;
        n.cls = {{0, 0x10FFFF}};
      } else if (c == '(') {
        ++pos_;
        n.kind = Node::kGroup;
        n.group = std::make_shared<Alts>(parse_alternatives(true));
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != ')') fail("expected ')'");
        ++pos_;
      } else if (is_gbnf_name_char(c)) {
        n.kind = Node::kRef;
        n.ref = parse_name();
      } else {
        fail(cat("unexpected character '", c, "'"));
      }
      parse_repetition(n);
      seq.push_back(std::move(n));
    }
    return seq;
  }

  void parse_repetition(Node& n) {
    if (pos_ >= s_.size()) return;
    const char c = s_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      n.min = c == '+' ? 1 : 0;
      n.max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++pos_;
      n.min = parse_int();
      n.max = n.min;
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        n.max = pos_ < s_.size() && s_[pos_] == '}' ? -1 : parse_int();
      }
      if (pos_ >= s_.size() || s_[pos_] != '}') fail("expected '}' closing a repetition");
      ++pos_;
      if (n.max >= 0 && n.max < n.min) fail(cat("repetition {", n.min, ",", n.max, "} has max < min"));
    } else {
      return;
    }
    if (pos_ < s_.size() && (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?' || s_[pos_] == '{'))
      fail("two repetition operators in a row (group the first)");
  }

  int parse_int() {
    const size_t b = pos_;
    int v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > 100000) fail("repetition count too large (at most 100000)");
    }
    if (b == pos_) fail("expected a number in a repetition");
    return v;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size()) fail("truncated escape");
      const char c = s_[pos_++];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail("bad hex digit in escape");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  uint32_t scalar(uint32_t cp) {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(cat("escape names no Unicode scalar value (", cp, ")"));
    return cp;
  }

  // One code point of a literal or class (escapes decoded, UTF-8 read).
  uint32_t parse_char() {
    if (pos_ >= s_.size()) fail("unexpected end of grammar");
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) fail("truncated escape");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return parse_hex(2);
        case 'u': return scalar(parse_hex(4));
        case 'U': return scalar(parse_hex(8));
        case '"': case '\\': case '/': case ']': case '[': case '-': case '^': return uint32_t(e);
        default: fail(cat("unknown escape '\\", e, "'"));
      }
    }
    uint32_t cp = 0;
    const size_t n = decode_utf8(s_.substr(pos_), cp);
    if (n == 0) fail("invalid UTF-8 in grammar");
    pos_ += n;
    return cp;
  }

  CodeRanges parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (pos_ < s_.size() && s_[pos_] == '^') negate = true, ++pos_;
    CodeRanges r;
    while (pos_ < s_.size() && s_[pos_] != ']') {
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range with end before start");
      }
      r.push_back({lo, hi});
    }
    if (pos_ >= s_.size()) fail("unterminated character class");
    ++pos_;
    r = normalize(std::move(r));
    return negate ? complement(r) : r;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string rule_;
};

}  // namespace

std::vector<std::pair<std::string, Alts>> parse_rules(std::string_view text) { return Parser(text).parse(); }

}  // namespace dsv4::grammar::gbnf
