// Putting GBNF grammars together: several generated grammars (a JSON schema's, a tool-call
// block's) in one text, each under a prefix so that their rule names cannot clash.
#pragma once
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::grammar {

// `gbnf` with every rule name (definitions and references) prefixed by `prefix`: `root` becomes
// `<prefix>root`. Literals, character classes, repetition counts and comments are left as they
// are. The text is expected to be well-formed (as the generators write it); what it does with
// malformed text does not matter, parse_gbnf reports that.
// Names in `shared` are left as they are (rules several grammars define alike, to be kept once).
std::string gbnf_prefixed(std::string_view gbnf, std::string_view prefix, const std::set<std::string>& shared = {});

// One grammar whose root is any of `grammars`' roots (each prefixed "g<i>-").
std::string gbnf_alternatives(const std::vector<std::string>& grammars);

}  // namespace dsv4::grammar
