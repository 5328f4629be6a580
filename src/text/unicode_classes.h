// The reference tokenizer compiles its split patterns with Oniguruma, whose Unicode
// tables (Unicode 16 in tokenizers 0.23) differ from PCRE2's (Unicode 14 in Debian
// 12), and whose \s leaves out U+180E where PCRE2's includes it. To give the same
// splits on every character, patterns are rewritten so that \p{L}, \p{M}, \p{N},
// \p{P}, \p{S} (and their long names) and \s match the reference's exact code point
// sets, which unicode_classes.inc records (generated from the reference itself).
#pragma once

#include <string>
#include <string_view>

namespace dsv4::text {

// Returns `pattern` with the classes above pinned to the reference's sets. Other
// constructs are left untouched. Limitation: a negated class (\P{..}, \S) inside
// [...] is kept as is, since PCRE2 classes cannot subtract ranges.
std::string pin_unicode_classes(std::string_view pattern);

}  // namespace dsv4::text
