#include "text/utf8.h"

namespace dsv4::text {
namespace {

// How a sequence starting at some position looks: `needed` bytes for a complete
// sequence (0 for a byte that can never start one) and `matched` bytes that are
// consistent with a well-formed sequence so far (the lead byte included).
struct SequenceProbe {
  size_t needed = 0;
  size_t matched = 0;
};

SequenceProbe probe_sequence(std::string_view bytes, size_t pos) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t lead = byte_at(pos);
  if (lead < 0x80) return {1, 1};
  // Allowed range of the second byte depends on the lead (excludes overlong forms,
  // surrogates and code points above U+10FFFF); later bytes are plain continuations.
  size_t needed = 0;
  uint8_t second_lo = 0x80, second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;
  } else {
    return {0, 1};
  }
  size_t matched = 1;
  while (matched < needed && pos + matched < bytes.size()) {
    const uint8_t b = byte_at(pos + matched);
    const uint8_t lo = matched == 1 ? second_lo : 0x80;
    const uint8_t hi = matched == 1 ? second_hi : 0xBF;
    if (b < lo || b > hi) break;
    ++matched;
  }
  return {needed, matched};
}

}  // namespace

size_t valid_utf8_sequence_at(std::string_view bytes, size_t pos) {
  const SequenceProbe probe = probe_sequence(bytes, pos);
  return probe.needed != 0 && probe.matched == probe.needed ? probe.needed : 0;
}

std::optional<size_t> first_invalid_utf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII fast path: most text is ASCII, skip it eight bytes at a time.
    while (pos + 8 <= bytes.size()) {
      uint64_t word = 0;
      for (size_t i = 0; i < 8; ++i) word |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[pos + i])) << (8 * i);
      if (word & 0x8080808080808080ULL) break;
      pos += 8;
    }
    if (pos >= bytes.size()) break;
    const size_t length = valid_utf8_sequence_at(bytes, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SequenceProbe probe = probe_sequence(bytes, pos);
    if (probe.needed != 0 && probe.matched == probe.needed) {
      out.append(bytes.substr(pos, probe.needed));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD for the maximal invalid subpart
    }
    pos += probe.matched;
  }
  return out;
}

size_t utf8_emittable_prefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SequenceProbe probe = probe_sequence(bytes, pos);
    const bool complete = probe.needed != 0 && probe.matched == probe.needed;
    const bool cut_by_end = probe.needed != 0 && !complete && pos + probe.matched == bytes.size();
    if (cut_by_end) return pos;  // more bytes may complete it: hold it back
    pos += probe.matched;
  }
  return pos;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_code_point(std::string_view bytes, size_t& pos) {
  const auto byte_at = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(bytes[i])); };
  const char32_t lead = byte_at(pos);
  const size_t length = utf8_length_from_lead(static_cast<uint8_t>(lead));
  char32_t cp = 0;
  switch (length) {
    case 1: cp = lead; break;
    case 2: cp = ((lead & 0x1F) << 6) | (byte_at(pos + 1) & 0x3F); break;
    case 3: cp = ((lead & 0x0F) << 12) | ((byte_at(pos + 1) & 0x3F) << 6) | (byte_at(pos + 2) & 0x3F); break;
    default:
      cp = ((lead & 0x07) << 18) | ((byte_at(pos + 1) & 0x3F) << 12) | ((byte_at(pos + 2) & 0x3F) << 6) |
           (byte_at(pos + 3) & 0x3F);
  }
  pos += length;
  return cp;
}

}  // namespace dsv4::text
