#include "text/unicode_classes.h"

#include <array>
#include <cstdio>
#include <span>
#include <vector>

#include "text/regex.h"
#include "text/utf8.h"

namespace dsv4::text {
namespace {

struct CodePointRange {
  char32_t first, last;
};

#include "text/unicode_classes.inc"

constexpr char32_t kCodeSpace = 0x110000;
enum Property { kLetter, kMark, kNumber, kPunctuation, kSymbol, kSpace, kPropertyCount };

struct PropertyInfo {
  const char* native;  // the class as PCRE2 writes it
  std::span<const CodePointRange> reference;
};
const std::array<PropertyInfo, kPropertyCount> kProperties = {{
    {"\\p{L}", kLetterRanges},
    {"\\p{M}", kMarkRanges},
    {"\\p{N}", kNumberRanges},
    {"\\p{P}", kPunctuationRanges},
    {"\\p{S}", kSymbolRanges},
    {"\\s", kSpaceRanges},
}};

void append_ranges(std::string& body, const std::vector<bool>& members) {
  char buffer[32];
  for (char32_t cp = 0; cp < kCodeSpace;) {
    if (!members[cp]) {
      ++cp;
      continue;
    }
    char32_t last = cp;
    while (last + 1 < kCodeSpace && members[last + 1]) ++last;
    if (cp == last) std::snprintf(buffer, sizeof buffer, "\\x{%X}", static_cast<unsigned>(cp));
    else std::snprintf(buffer, sizeof buffer, "\\x{%X}-\\x{%X}", static_cast<unsigned>(cp), static_cast<unsigned>(last));
    body += buffer;
    cp = last + 1;
  }
}

// Class bodies (usable inside [...]) matching the reference's sets. Where PCRE2's own
// property only lacks some code points (its Unicode is older), the body is the native
// property plus those code points: a property lookup is much faster than scanning
// hundreds of ranges. Where PCRE2 has extra code points (U+180E in \s, or a PCRE2
// newer than the reference), the body is the reference's full list of ranges.
// PCRE2's sets are read off PCRE2 itself, once, so any PCRE2 version works.
std::array<std::string, kPropertyCount> compute_class_bodies() {
  std::string every_scalar;
  every_scalar.reserve(4 * kCodeSpace);
  for (char32_t cp = 0; cp < kCodeSpace; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) append_utf8(every_scalar, cp);
  }
  std::array<std::string, kPropertyCount> bodies;
  std::vector<std::pair<size_t, size_t>> matches;
  for (int p = 0; p < kPropertyCount; ++p) {
    std::vector<bool> reference(kCodeSpace, false), pcre2(kCodeSpace, false);
    for (const CodePointRange& range : kProperties[p].reference) {
      for (char32_t cp = range.first; cp <= range.last; ++cp) reference[cp] = true;
    }
    Regex(std::string(kProperties[p].native) + "+", /*native_unicode=*/true).find_all(every_scalar, matches);
    for (const auto& [begin, end] : matches) {
      for (size_t pos = begin; pos < end;) pcre2[next_code_point(every_scalar, pos)] = true;
    }
    std::vector<bool> missing(kCodeSpace, false);
    bool has_extra = false;
    for (char32_t cp = 0; cp < kCodeSpace; ++cp) {
      missing[cp] = reference[cp] && !pcre2[cp];
      has_extra = has_extra || (pcre2[cp] && !reference[cp]);
    }
    if (has_extra) {
      append_ranges(bodies[p], reference);
    } else {
      bodies[p] = kProperties[p].native;
      append_ranges(bodies[p], missing);
    }
  }
  return bodies;
}

const std::string& class_body(Property property) {
  static const std::array<std::string, kPropertyCount> bodies = compute_class_bodies();
  return bodies[property];
}

// The property named after \p (short or long form), or kPropertyCount for one left to PCRE2.
Property property_named(std::string_view name) {
  if (name == "L" || name == "Letter") return kLetter;
  if (name == "M" || name == "Mark") return kMark;
  if (name == "N" || name == "Number") return kNumber;
  if (name == "P" || name == "Punctuation") return kPunctuation;
  if (name == "S" || name == "Symbol") return kSymbol;
  return kPropertyCount;
}

}  // namespace

std::string pin_unicode_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  bool in_class = false;
  size_t class_start = 0;  // position right after "[" or "[^": a "]" there is literal
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char kind = pattern[i + 1];
      if (kind == 'Q') {  // \Q...\E quotes literally
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      bool negated = kind == 'P' || kind == 'S';
      Property property = kPropertyCount;
      size_t length = 2;
      if (kind == 'p' || kind == 'P') {
        std::string_view name;
        if (i + 2 < pattern.size() && pattern[i + 2] == '{') {
          const size_t close = pattern.find('}', i + 3);
          if (close != std::string_view::npos) {
            name = pattern.substr(i + 3, close - i - 3);
            length = close + 1 - i;
          }
        } else if (i + 2 < pattern.size()) {
          name = pattern.substr(i + 2, 1);
          length = 3;
        }
        if (name.starts_with('^')) {
          negated = !negated;
          name.remove_prefix(1);
        }
        property = property_named(name);
      } else if (kind == 's' || kind == 'S') {
        property = kSpace;
      }
      if (property != kPropertyCount && !in_class) {
        out += negated ? "[^" : "[";
        out += class_body(property);
        out += ']';
        i += length;
        continue;
      }
      if (property != kPropertyCount && !negated) {
        out += class_body(property);
        i += length;
        continue;
      }
      out.append(pattern.substr(i, 2));  // any other escape: keep it, and skip the escaped character
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < pattern.size() && pattern[i] == '^') out += pattern[i++];
      class_start = i;
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      const size_t stop = end == std::string_view::npos ? i + 1 : end + 2;
      out.append(pattern.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    out += c;
    ++i;
  }
  return out;
}

}  // namespace dsv4::text
