// Splitting code point ranges into UTF-8 byte-range sequences: a range is cut where its
// encodings change length, then where its trailing 6-bit groups do not span all of 0x80-0xBF,
// until every byte position of the encodings varies over one contiguous range.
#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace dsv4::grammar {
namespace {

constexpr uint32_t kMax = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* b) {
  switch (encoded_length(cp)) {
    case 1: b[0] = uint8_t(cp); break;
    case 2: b[0] = uint8_t(0xC0 | (cp >> 6)); b[1] = uint8_t(0x80 | (cp & 0x3F)); break;
    case 3:
      b[0] = uint8_t(0xE0 | (cp >> 12)); b[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F)); b[2] = uint8_t(0x80 | (cp & 0x3F));
      break;
    default:
      b[0] = uint8_t(0xF0 | (cp >> 18)); b[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
      b[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F)); b[3] = uint8_t(0x80 | (cp & 0x3F));
  }
}

void split(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split(lo, boundary, out);
      split(boundary + 1, hi, out);
      return;
    }
  }
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ByteRange> seq(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) seq[size_t(i)] = {a[i], b[i]};
  out.push_back(std::move(seq));
}

}  // namespace

CodeRanges normalize(CodeRanges r) {
  CodeRanges clipped;
  for (CodeRange c : r) {
    if (c.lo > kMax) continue;
    c.hi = std::min(c.hi, kMax);
    if (c.lo < kSurrogateLo && c.hi > kSurrogateHi) {  // cut out the surrogates
      clipped.push_back({c.lo, kSurrogateLo - 1});
      clipped.push_back({kSurrogateHi + 1, c.hi});
    } else if (c.lo >= kSurrogateLo && c.hi <= kSurrogateHi) {
      continue;
    } else {
      if (c.lo >= kSurrogateLo && c.lo <= kSurrogateHi) c.lo = kSurrogateHi + 1;
      if (c.hi >= kSurrogateLo && c.hi <= kSurrogateHi) c.hi = kSurrogateLo - 1;
      if (c.lo <= c.hi) clipped.push_back(c);
    }
  }
  std::sort(clipped.begin(), clipped.end());
  CodeRanges out;
  for (const CodeRange& c : clipped) {
    if (!out.empty() && c.lo <= out.back().hi + 1) out.back().hi = std::max(out.back().hi, c.hi);
    else out.push_back(c);
  }
  return out;
}

CodeRanges complement(const CodeRanges& r) {
  CodeRanges out;
  uint32_t next = 0;
  for (const CodeRange& c : r) {
    if (c.lo > next) out.push_back({next, c.lo - 1});
    next = c.hi + 1;
  }
  if (next <= kMax) out.push_back({next, kMax});
  return normalize(out);
}

std::vector<std::vector<ByteRange>> utf8_sequences(const CodeRanges& r) {
  std::vector<std::vector<ByteRange>> out;
  for (const CodeRange& c : r) split(c.lo, c.hi, out);
  return out;
}

size_t decode_utf8(std::string_view s, uint32_t& cp) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c >> 5) == 6) {
    n = 2, cp = c & 0x1F;
  } else if ((c >> 4) == 14) {
    n = 3, cp = c & 0x0F;
  } else if ((c >> 3) == 30) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) >> 6) != 2) return 0;
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  if (encoded_length(cp) != int(n) || cp > kMax || (cp >= kSurrogateLo && cp <= kSurrogateHi)) return 0;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  uint8_t b[4];
  encode(cp, b);
  out.append(reinterpret_cast<const char*>(b), size_t(encoded_length(cp)));
}

}  // namespace dsv4::grammar
