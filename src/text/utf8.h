// UTF-8 helpers shared by the tokenizer, its decoders and the chat format.
// Validation follows the Unicode standard's well-formed byte sequences (table 3-7),
// which is also what Rust's `str` enforces, so "valid" here means the same thing as
// in the Hugging Face reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsv4::text {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (or of a
// truncated final sequence); nullopt when the whole string is valid UTF-8.
std::optional<size_t> first_invalid_utf8(std::string_view bytes);

// Length of the well-formed sequence starting at bytes[pos] (1..4), or 0 when the bytes
// there are invalid or truncated.
size_t valid_utf8_sequence_at(std::string_view bytes, size_t pos);

// Bytes -> text the way Rust's String::from_utf8_lossy does: every maximal invalid
// subpart becomes one U+FFFD. The tokenizer's decode must match this exactly.
std::string utf8_lossy(std::string_view bytes);

// Length of the longest prefix of `bytes` that does not end inside a sequence that
// could still become valid with more bytes. Used by the streaming decoder: what lies
// before that point can be emitted (lossily) without changing the final text.
size_t utf8_emittable_prefix(std::string_view bytes);

// Appends the UTF-8 encoding of a code point (must be a scalar value).
void append_utf8(std::string& out, char32_t code_point);

// Decodes the sequence at bytes[pos]; the input must be valid UTF-8.
// Returns the code point and advances pos.
char32_t next_code_point(std::string_view bytes, size_t& pos);

// Length in bytes of the sequence whose lead byte is `lead` (valid input assumed).
inline size_t utf8_length_from_lead(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace dsv4::text
