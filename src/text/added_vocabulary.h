// Added tokens of a tokenizer.json ("added_tokens"): matched in the raw text before
// pre-tokenization and never split. Matching follows tokenizers' AddedVocabulary:
// leftmost-longest, first the tokens with normalized=false on the raw text, then the
// normalized ones on what remains; single_word / lstrip / rstrip honoured.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::text {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class AddedVocabulary {
 public:
  // A piece of the input: either an added token (id >= 0) or plain text (id == -1).
  struct Segment {
    std::string_view text;
    int32_t id;
  };

  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Replaces `out` with the segments of `text` (valid UTF-8). Empty plain segments
  // are omitted.
  void split(std::string_view text, std::vector<Segment>& out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // A byte trie of token contents; `token` is an index into tokens_ or -1.
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t token = -1;
  };
  struct Trie {
    std::vector<Node> nodes{Node{}};
    bool empty() const { return nodes.size() == 1; }
    void insert(std::string_view content, int32_t token);
    int32_t child(int32_t node, uint8_t byte) const;
  };
  struct Match {
    size_t begin, end;
    int32_t token;
  };

  // Non-overlapping leftmost-longest matches, before the single_word/strip rules.
  void find_matches(std::string_view text, const Trie& trie, std::vector<Match>& matches) const;
  // One pass of AddedVocabulary::split_with_indices over a plain segment.
  void split_pass(std::string_view text, const Trie& trie, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_trie_;         // normalized == false
  Trie normalized_trie_;  // normalized == true
};

}  // namespace dsv4::text
