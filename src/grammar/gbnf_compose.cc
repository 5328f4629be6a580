#include "grammar/gbnf_compose.h"
#include "grammar/grammar.h"

namespace dsv4::grammar {
std::string gbnf_prefixed(std::string_view gbnf, std::string_view prefix, const std::set<std::string>& shared) {
  std::string out;
  out.reserve(gbnf.size() * 5 / 4);
  size_t i = 0;
  // Copies a delimited span (literal, class, repetition) whole, backslash escapes included.
  auto copy_until = [&](char close) {
    out += gbnf[i++];
    while (i < gbnf.size() && gbnf[i] != close) {
      if (gbnf[i] == '\\' && i + 1 < gbnf.size()) out += gbnf[i++];
      out += gbnf[i++];
    }
    if (i < gbnf.size()) out += gbnf[i++];
  };
  while (i < gbnf.size()) {
    const char c = gbnf[i];
    if (c == '"') copy_until('"');
    else if (c == '[') copy_until(']');
    else if (c == '{') copy_until('}');
    else if (c == '#') {
      while (i < gbnf.size() && gbnf[i] != '\n') out += gbnf[i++];
    } else if (is_gbnf_name_char(c)) {
      const size_t begin = i;
      while (i < gbnf.size() && is_gbnf_name_char(gbnf[i])) ++i;
      const std::string name(gbnf.substr(begin, i - begin));
      if (!shared.count(name)) out += prefix;
      out += name;
    } else {
      out += gbnf[i++];
    }
  }
  return out;
}

std::string gbnf_alternatives(const std::vector<std::string>& grammars) {
  std::string root = "root ::=", rules;
  for (size_t i = 0; i < grammars.size(); ++i) {
    const std::string prefix = "g" + std::to_string(i) + "-";
    root += (i ? " | " : " ") + prefix + "root";
    rules += gbnf_prefixed(grammars[i], prefix);
    if (!rules.empty() && rules.back() != '\n') rules += '\n';
  }
  return root + "\n" + rules;
}

}  // namespace dsv4::grammar
