// The DeepSeek tokenizer: a reader of Hugging Face tokenizer.json files of the kind
// DeepSeek ships (byte-level BPE, Split + ByteLevel pre-tokenizers, added/special
// tokens), producing the same ids as the `tokenizers` library.
//
//   auto tok = Tokenizer::load("tokenizer.json", "tokenizer_config.json");
//   std::vector<int32_t> ids = tok.encode("Hello", /*add_bos=*/true);
//   std::string text = tok.decode(ids);
//
// A Tokenizer is immutable after load and may be shared by threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::text {

// Every failure of this module that stems from its input (files, text, ids) is a
// TokenizerError whose message names the offending file, field, token or id.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  // Reads tokenizer.json and, unless the second path is empty, tokenizer_config.json
  // (add_bos_token, bos_token, eos_token). Throws TokenizerError naming the file on
  // an unreadable or malformed file or an unsupported feature.
  static Tokenizer load(const std::filesystem::path& tokenizer_json,
                        const std::filesystem::path& tokenizer_config_json_or_empty);

  // The ids of `text` (valid UTF-8, else TokenizerError with the byte offset).
  // With add_bos, the BOS id is prepended when the config asks for it
  // (add_bos_token: true), which is what Hugging Face's add_special_tokens does for
  // DeepSeek; without a config, or with add_bos_token false, nothing is added.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;

  // The text of `ids`. Ids that name no token throw TokenizerError. With skip_special,
  // tokens marked "special" in the file are left out (Hugging Face's
  // skip_special_tokens). Bytes that do not form UTF-8 become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Largest token id + 1, added tokens included.
  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // Id of a token given by its content (added tokens first, then the BPE vocabulary).
  std::optional<int32_t> token_id(std::string_view token) const;
  // Content of a token as written in the file; TokenizerError for an unknown id.
  const std::string& token_content(int32_t id) const;
  bool is_special(int32_t id) const;

  // The bytes token `id` stands for once decoded (before UTF-8 repair), and whether
  // decode() separates tokens with a space (a file without a decoder).
  const std::string& token_bytes(int32_t id) const;
  bool joins_tokens_with_space() const;

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns ids arriving one at a time into text, emitting only complete UTF-8 sequences:
// a character whose bytes are spread over several tokens comes out once its last byte
// has arrived. The concatenation of everything push() and flush() return equals
// tokenizer.decode(all ids). The tokenizer must outlive the decoder; one decoder
// serves one sequence (not thread-safe), while the tokenizer can be shared.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Newly complete text (possibly empty). Throws TokenizerError for an unknown id.
  std::string push(int32_t id);
  // Whatever is still pending (an incomplete sequence becomes U+FFFD); resets the state.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  bool first_token_ = true;
  std::string pending_;
};

}  // namespace dsv4::text
