// The BPE model of a Hugging Face tokenizer.json: vocabulary + ranked merges, applied
// to one pre-tokenized piece at a time exactly as tokenizers' `Word::merge_all` does
// (always the lowest-ranked mergeable pair, leftmost first). Results are cached per
// piece, since natural text repeats the same words constantly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsv4::text {

class PieceCache;

// Transparent hashing so that maps keyed by std::string can be probed with views.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `spec` is the tokenizer.json "model" object. Throws std::invalid_argument on a
  // missing field, a merge whose tokens are not in the vocabulary, or an option this
  // implementation does not support (dropout, byte_fallback, subword prefix/suffix).
  static BpeModel from_json(const nlohmann::json& spec);

  // Appends the ids of one piece. With `raw_bytes`, each byte of the piece stands for
  // its byte-level character (see PreTokenizer::model_sees_raw_bytes).
  void tokenize(std::string_view piece, bool raw_bytes, std::vector<int32_t>& ids) const;

  const TokenMap& vocab() const { return vocab_; }
  std::optional<int32_t> token_id(std::string_view token) const;

  BpeModel();
  ~BpeModel();
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;

 private:
  struct MergeTable;

  // The symbol ids a piece starts as, before any merge.
  void initial_symbols(std::string_view piece, bool raw_bytes, std::vector<int32_t>& symbols) const;
  void merge_all(std::vector<int32_t>& symbols) const;

  TokenMap vocab_;
  std::unique_ptr<MergeTable> merges_;
  std::unique_ptr<PieceCache> cache_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t byte_symbol_[256];  // vocab id of each byte's byte-level character, -1 if absent
};

}  // namespace dsv4::text
