#include "text/byte_level.h"

#include "text/utf8.h"

namespace dsv4::text {
namespace {

// Printable bytes keep their own code point; the rest are numbered from U+0100 in
// byte order. Same construction as GPT-2's bytes_to_unicode().
struct ByteLevelTables {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int16_t, 0x144> char_to_byte{};  // -1: not in the alphabet

  ByteLevelTables() {
    char_to_byte.fill(-1);
    char32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_extra++;
      byte_to_char[b] = cp;
      char_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables instance;
  return instance;
}

}  // namespace

char32_t byte_level_char(uint8_t b) { return tables().byte_to_char[b]; }

std::optional<uint8_t> byte_level_byte(char32_t cp) {
  if (cp >= tables().char_to_byte.size()) return std::nullopt;
  const int16_t b = tables().char_to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(out, byte_level_char(static_cast<uint8_t>(c)));
  return out;
}

std::string byte_level_decode_token(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const std::optional<uint8_t> b = byte_level_byte(next_code_point(token, pos));
    if (!b) return std::string(token);
    bytes.push_back(static_cast<char>(*b));
  }
  return bytes;
}

}  // namespace dsv4::text
