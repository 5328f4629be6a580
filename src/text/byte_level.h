// GPT-2's byte-level alphabet, as used by Hugging Face's `ByteLevel` pre-tokenizer and
// decoder: every byte value is given a printable code point (printable Latin-1 bytes
// map to themselves, the other 68 to U+0100..U+0143), so that any byte string becomes
// a string of "characters" that BPE can merge.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsv4::text {

// The code point that stands for byte `b`.
char32_t byte_level_char(uint8_t b);

// The byte a code point of the alphabet stands for; nullopt for any other code point.
std::optional<uint8_t> byte_level_byte(char32_t code_point);

// Maps every byte of `bytes` to its alphabet character (UTF-8 encoded).
std::string byte_level_encode(std::string_view bytes);

// The `ByteLevel` decoder's rule for one token: when every character of the token is
// in the alphabet, the token stands for those bytes; otherwise (e.g. an added token
// such as "<｜User｜>") the token's own UTF-8 bytes are used unchanged.
std::string byte_level_decode_token(std::string_view token);

}  // namespace dsv4::text
