// Unicode code point ranges and their UTF-8 byte sequences (for character classes).
#pragma once
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::grammar {

struct CodeRange {
  uint32_t lo, hi;  // inclusive
  auto operator<=>(const CodeRange&) const = default;
};
using CodeRanges = std::vector<CodeRange>;

struct ByteRange {
  uint8_t lo, hi;
};

// Sorted, merged, clipped to scalar values (no surrogates, ≤ U+10FFFF).
CodeRanges normalize(CodeRanges r);
// Every scalar value not in r (r normalized).
CodeRanges complement(const CodeRanges& r);
// The UTF-8 encodings of r as sequences of byte ranges: a string is the encoding of a code
// point in r iff it matches one of the sequences (each byte in its range).
std::vector<std::vector<ByteRange>> utf8_sequences(const CodeRanges& r);

// Decodes one UTF-8 code point at the start of s; returns its length (0: invalid).
size_t decode_utf8(std::string_view s, uint32_t& cp);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace dsv4::grammar
