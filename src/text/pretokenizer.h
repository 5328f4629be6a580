// Hugging Face pre-tokenizers: they cut a text segment into the pieces ("words") that
// BPE encodes one by one. Supported: Sequence, Split (string or regex pattern, every
// delimiter behaviour, invert) and ByteLevel (add_prefix_space, use_regex).
#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/regex.h"

namespace dsv4::text {

// Pieces flowing through the pre-tokenizers. Views point into the caller's text or,
// for pieces a step had to rewrite, into `storage` (a deque keeps them in place).
struct PieceBuffer {
  struct Span {
    size_t begin, end;
    bool is_match;
  };
  std::vector<std::string_view> pieces;
  std::vector<std::string_view> scratch;
  std::vector<std::pair<size_t, size_t>> matches;
  std::vector<Span> spans;
  std::deque<std::string> storage;
  // The ByteLevel mapping is recorded rather than applied: when it is the last step,
  // the model maps each byte itself, which saves re-encoding every piece.
  bool byte_level_pending = false;

  void clear() {
    pieces.clear();
    storage.clear();
    byte_level_pending = false;
  }
};

class PreTokenizer {
 public:
  // `spec` is the tokenizer.json "pre_tokenizer" field (null: the text is one piece).
  // Throws std::invalid_argument on an unsupported type or a bad field.
  static PreTokenizer from_json(const nlohmann::json& spec);

  // Replaces `buffer.pieces` with the pieces of `text`. `text` must be valid UTF-8
  // and must outlive the views.
  void run(std::string_view text, PieceBuffer& buffer) const;

  // True when the pieces reach the model as raw bytes that stand for their
  // byte-level characters (ByteLevel is the last step).
  bool model_sees_raw_bytes() const { return ends_with_byte_level_; }

  PreTokenizer() = default;
  PreTokenizer(PreTokenizer&&) noexcept = default;
  PreTokenizer& operator=(PreTokenizer&&) noexcept = default;

 private:
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  struct Step {
    enum class Kind { Split, ByteLevel } kind = Kind::Split;
    Regex regex{""};
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel only
    bool use_regex = false;         // ByteLevel only: also split with GPT-2's pattern
  };

  static void append_steps(const nlohmann::json& spec, std::vector<Step>& steps);
  static void split_piece(std::string_view piece, const Regex& regex, Behavior behavior, bool invert,
                          PieceBuffer& buffer);
  static void materialize_byte_level(PieceBuffer& buffer);

  std::vector<Step> steps_;
  bool ends_with_byte_level_ = false;
};

}  // namespace dsv4::text
