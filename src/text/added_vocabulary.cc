#include "text/added_vocabulary.h"

#include <algorithm>

#include "text/regex.h"
#include "text/utf8.h"

namespace dsv4::text {
namespace {

// Unicode classes of the reference's word/space rules (Rust regex `\w` and `\s`).
bool code_point_matches(const Regex& single_char_class, char32_t cp) {
  std::string encoded;
  append_utf8(encoded, cp);
  return single_char_class.find_first(encoded).has_value();
}

bool is_word_char(char32_t cp) {
  static const Regex word(R"(\A[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]\z)");
  return code_point_matches(word, cp);
}

bool is_white_space(char32_t cp) {
  static const Regex space(R"(\A\p{White_Space}\z)");
  return code_point_matches(space, cp);
}

// Start of the last code point of a non-empty valid UTF-8 string.
size_t last_code_point_start(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t pos = last_code_point_start(text);
  return is_word_char(next_code_point(text, pos));
}

bool starts_with_word(std::string_view text) {
  if (text.empty()) return false;
  size_t pos = 0;
  return is_word_char(next_code_point(text, pos));
}

// Where the run of white space that ends `text` begins.
size_t trailing_space_start(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    const size_t start = last_code_point_start(text.substr(0, end));
    size_t pos = start;
    if (!is_white_space(next_code_point(text, pos))) break;
    end = start;
  }
  return end;
}

// Length of the run of white space that starts `text`.
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_white_space(next_code_point(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view content, int32_t token) {
  int32_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace_back(byte, next);
      nodes.emplace_back();
    }
    node = next;
  }
  nodes[node].token = token;
}

int32_t AddedVocabulary::Trie::child(int32_t node, uint8_t byte) const {
  for (const auto& [b, next] : nodes[node].children) {
    if (b == byte) return next;
  }
  return -1;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;  // never matched, as in the reference
    (tokens_[i].normalized ? normalized_trie_ : raw_trie_).insert(tokens_[i].content, static_cast<int32_t>(i));
  }
}

void AddedVocabulary::find_matches(std::string_view text, const Trie& trie, std::vector<Match>& matches) const {
  matches.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t node = 0;
    int32_t best_token = -1;
    size_t best_end = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      node = trie.child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      if (trie.nodes[node].token >= 0) {
        best_token = trie.nodes[node].token;
        best_end = i + 1;
      }
    }
    if (best_token >= 0) {
      matches.push_back({pos, best_end, best_token});
      pos = best_end;
    } else {
      ++pos;
    }
  }
}

void AddedVocabulary::split_pass(std::string_view text, const Trie& trie, std::vector<Segment>& out) const {
  thread_local std::vector<Match> matches;
  find_matches(text, trie, matches);
  size_t consumed = 0;  // end of what the previous segment took
  for (const Match& match : matches) {
    const AddedToken& token = tokens_[match.token];
    size_t begin = match.begin, end = match.end;
    if (token.single_word) {
      const bool space_before = begin == 0 || !ends_with_word(text.substr(0, begin));
      const bool space_after = end == text.size() || !starts_with_word(text.substr(end));
      if (!space_before || !space_after) continue;  // inside a word: not this token
    }
    // The stripped white space belongs to the token, except what an earlier match took.
    if (token.lstrip) begin = std::max(trailing_space_start(text.substr(0, begin)), consumed);
    if (token.rstrip) end += leading_space_length(text.substr(end));
    if (consumed < begin) out.push_back({text.substr(consumed, begin - consumed), -1});
    out.push_back({text.substr(begin, end - begin), token.id});
    consumed = end;
  }
  if (consumed < text.size()) out.push_back({text.substr(consumed), -1});
}

void AddedVocabulary::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  if (text.empty()) return;
  if (raw_trie_.empty() && normalized_trie_.empty()) {
    out.push_back({text, -1});
    return;
  }
  // Pass 1 on the raw text; pass 2 on the plain segments of pass 1. The normalizers
  // this implementation accepts leave text unchanged, so "normalized" text is the
  // text itself.
  thread_local std::vector<Segment> first_pass;
  first_pass.clear();
  split_pass(text, raw_trie_, first_pass);
  for (const Segment& segment : first_pass) {
    if (segment.id >= 0) out.push_back(segment);
    else split_pass(segment.text, normalized_trie_, out);
  }
}

}  // namespace dsv4::text
