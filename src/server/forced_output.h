// A test aid (`dsv4 serve --force-output-file F`): scripted completions forced through the
// decoder's token mask, so that tests of the server see reasoning, tool-call blocks or stop
// strings from a checkpoint with random weights. Every decoding path still runs (drafts,
// verification, sampling); the mask only leaves one token allowed at each position.
//
// F is a JSON array of {"prompt_contains": TEXT, "output": TEXT}: a request whose prompt
// text contains TEXT gets that output (the first rule that matches), then the stop token.
// "output" may also be an array of strings, each tokenized alone: a tokenization other than the
// tokenizer's own choice, as a model may sample.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "speculative/token_mask.h"
#include "text/tokenizer.h"

namespace dsv4::server {

// Allows exactly the scripted token at each position after the prompt, then `eos`.
class ForcedOutputMask final : public TokenMask {
 public:
  ForcedOutputMask(std::vector<int32_t> tokens, size_t prompt_length, int32_t eos)
      : tokens_(std::move(tokens)), prompt_length_(prompt_length), eos_(eos) {}
  void allowed_tokens(size_t sequence, std::span<const int32_t> context, std::span<uint64_t> allowed) const override;

 private:
  std::vector<int32_t> tokens_;
  size_t prompt_length_;
  int32_t eos_;
};

class ForcedOutputs {
 public:
  // Throws naming the file when it cannot be read or is not the format above.
  static ForcedOutputs load(const std::filesystem::path& file, const text::Tokenizer& tokenizer);
  // The mask for a prompt (none when no rule matches).
  std::unique_ptr<TokenMask> mask_for(const std::string& prompt_text, size_t prompt_length, int32_t eos) const;

 private:
  struct Rule {
    std::string prompt_contains;
    std::vector<int32_t> output;
  };
  std::vector<Rule> rules_;
};

}  // namespace dsv4::server
