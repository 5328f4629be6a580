#include "text/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "text/added_vocabulary.h"
#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/pretokenizer.h"
#include "text/utf8.h"

namespace dsv4::text {

namespace {
// How decode() turns tokens into text: the reference joins with " " when the file has
// no decoder, concatenates for an empty decoder Sequence, and maps characters back
// to bytes for ByteLevel.
enum class DecoderKind { JoinWithSpace, Concatenate, ByteLevel };
}  // namespace

struct Tokenizer::Impl {
  BpeModel model;
  PreTokenizer pre_tokenizer;
  AddedVocabulary added;
  DecoderKind decoder = DecoderKind::JoinWithSpace;

  // Per id, indexed 0..vocab_size-1: the token's content, the bytes it decodes to,
  // and flags. An id no token uses has known == false.
  std::vector<std::string> contents;
  std::vector<std::string> decoded_bytes;
  std::vector<uint8_t> known;
  std::vector<uint8_t> special;

  TokenMap added_ids;  // content -> id of the added tokens

  bool add_bos_token = false;
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;

  void check_id(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= known.size() || !known[id]) {
      throw TokenizerError("unknown token id " + std::to_string(id) + " (the vocabulary has ids 0.." +
                           std::to_string(static_cast<int64_t>(known.size()) - 1) + ")");
    }
  }
};

namespace {

std::string read_file(const std::filesystem::path& path, const char* what) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw TokenizerError(std::string("cannot read ") + what + " '" + path.string() + "': it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw TokenizerError(std::string("cannot read ") + what + " '" + path.string() + "': " + std::strerror(errno));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw TokenizerError(std::string("error reading ") + what + " '" + path.string() + "'");
  return contents.str();
}

nlohmann::json parse_json_file(const std::filesystem::path& path, const char* what) {
  const std::string text = read_file(path, what);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(std::string("malformed JSON in ") + what + " '" + path.string() + "': " + e.what());
  }
}

// Only normalizers that leave the text unchanged are accepted (DeepSeek's is an empty
// Sequence); anything else would silently produce different ids.
void check_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return;
  const std::string type = spec.is_object() ? spec.value("type", std::string()) : std::string();
  if (type == "Sequence" && spec.contains("normalizers") && spec["normalizers"].is_array()) {
    for (const nlohmann::json& child : spec["normalizers"]) check_normalizer(child);
    return;
  }
  throw std::invalid_argument("unsupported normalizer " + spec.dump() + " (only identity normalizers are supported)");
}

DecoderKind parse_decoder(const nlohmann::json& spec) {
  using Kind = DecoderKind;
  if (spec.is_null()) return Kind::JoinWithSpace;  // tokens.join(" ") in the reference
  const std::string type = spec.is_object() ? spec.value("type", std::string()) : std::string();
  if (type == "ByteLevel") return Kind::ByteLevel;
  if (type == "Sequence" && spec.contains("decoders") && spec["decoders"].is_array()) {
    const nlohmann::json& children = spec["decoders"];
    if (children.empty()) return Kind::Concatenate;
    if (children.size() == 1 && children[0].is_object() && children[0].value("type", std::string()) == "ByteLevel") {
      return Kind::ByteLevel;
    }
  }
  throw std::invalid_argument("unsupported decoder " + spec.dump() + " (supported: ByteLevel, none)");
}

bool flag(const nlohmann::json& entry, const char* field, bool fallback) {
  if (!entry.contains(field) || entry[field].is_null()) return fallback;
  if (!entry[field].is_boolean()) throw std::invalid_argument(std::string("field '") + field + "' must be a boolean");
  return entry[field].get<bool>();
}

// Reads "added_tokens" and checks each id against the one the reference would give
// the token: the reference ignores the ids in the file and re-derives them (existing
// token -> its id, otherwise the next free id after the BPE vocabulary), so a file
// whose ids disagree would be tokenized differently by it. We refuse such files.
std::vector<AddedToken> parse_added_tokens(const nlohmann::json& list, const BpeModel& model) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) throw std::invalid_argument("'added_tokens' must be an array");
  std::unordered_map<std::string, size_t> index_of_content;
  int64_t next_free_id = static_cast<int64_t>(model.vocab().size());
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& entry = list[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string()) {
      throw std::invalid_argument(where + ": missing field 'content'");
    }
    if (!entry.contains("id") || !entry["id"].is_number_integer()) throw std::invalid_argument(where + ": missing field 'id'");
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    const int64_t file_id = entry["id"].get<int64_t>();
    try {
      token.single_word = flag(entry, "single_word", false);
      token.lstrip = flag(entry, "lstrip", false);
      token.rstrip = flag(entry, "rstrip", false);
      token.special = flag(entry, "special", false);
      token.normalized = flag(entry, "normalized", !token.special);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
    if (token.content.empty()) continue;  // ignored by the reference

    int64_t derived_id;
    const auto seen = index_of_content.find(token.content);
    if (seen != index_of_content.end()) derived_id = tokens[seen->second].id;
    else if (const auto in_model = model.token_id(token.content)) derived_id = *in_model;
    else derived_id = next_free_id++;
    if (file_id != derived_id) {
      throw std::invalid_argument(where + " \"" + token.content + "\" has id " + std::to_string(file_id) +
                                  " but the tokenizers library would assign it id " + std::to_string(derived_id));
    }
    token.id = static_cast<int32_t>(derived_id);
    if (seen != index_of_content.end()) {
      tokens[seen->second] = std::move(token);  // a repeated token replaces the earlier one
    } else {
      index_of_content.emplace(token.content, tokens.size());
      tokens.push_back(std::move(token));
    }
  }
  return tokens;
}

std::optional<std::string> config_token(const nlohmann::json& config, const char* field) {
  if (!config.contains(field) || config[field].is_null()) return std::nullopt;
  const nlohmann::json& value = config[field];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  throw std::invalid_argument(std::string("field '") + field + "' must be a string or an AddedToken object");
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json, const std::filesystem::path& config_json) {
  auto impl = std::make_unique<Impl>();
  const nlohmann::json spec = parse_json_file(tokenizer_json, "tokenizer file");
  try {
    if (!spec.is_object()) throw std::invalid_argument("the top level must be a JSON object");
    if (!spec.contains("model")) throw std::invalid_argument("missing field 'model'");
    check_normalizer(spec.value("normalizer", nlohmann::json()));
    impl->model = BpeModel::from_json(spec["model"]);
    impl->pre_tokenizer = PreTokenizer::from_json(spec.value("pre_tokenizer", nlohmann::json()));
    impl->decoder = parse_decoder(spec.value("decoder", nlohmann::json()));
    impl->added = AddedVocabulary(parse_added_tokens(spec.value("added_tokens", nlohmann::json()), impl->model));
  } catch (const std::invalid_argument& e) {
    throw TokenizerError("tokenizer file '" + tokenizer_json.string() + "': " + e.what());
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong JSON type
    throw TokenizerError("tokenizer file '" + tokenizer_json.string() + "': " + e.what());
  }

  // Id tables. Added tokens take precedence over the model for the same id, as in
  // the reference's decode; "special" is decided by content, also as there.
  int32_t max_id = -1;
  for (const auto& [content, id] : impl->model.vocab()) max_id = std::max(max_id, id);
  for (const AddedToken& token : impl->added.tokens()) max_id = std::max(max_id, token.id);
  const size_t size = static_cast<size_t>(max_id + 1);
  impl->contents.assign(size, std::string());
  impl->known.assign(size, 0);
  impl->special.assign(size, 0);
  for (const auto& [content, id] : impl->model.vocab()) {
    impl->contents[id] = content;
    impl->known[id] = 1;
  }
  std::unordered_set<std::string> special_contents;
  for (const AddedToken& token : impl->added.tokens()) {
    impl->added_ids.emplace(token.content, token.id);
    impl->contents[token.id] = token.content;
    impl->known[token.id] = 1;
    if (token.special) special_contents.insert(token.content);
  }
  impl->decoded_bytes.assign(size, std::string());
  for (size_t id = 0; id < size; ++id) {
    if (!impl->known[id]) continue;
    impl->special[id] = special_contents.count(impl->contents[id]) ? 1 : 0;
    impl->decoded_bytes[id] = impl->decoder == DecoderKind::ByteLevel ? byte_level_decode_token(impl->contents[id])
                                                                            : impl->contents[id];
  }

  Tokenizer tokenizer(std::move(impl));
  if (!config_json.empty()) {
    const nlohmann::json config = parse_json_file(config_json, "tokenizer config");
    Impl& state = *tokenizer.impl_;
    try {
      if (!config.is_object()) throw std::invalid_argument("the top level must be a JSON object");
      state.add_bos_token = flag(config, "add_bos_token", false);
      const auto resolve = [&](const char* field) -> std::optional<int32_t> {
        const std::optional<std::string> content = config_token(config, field);
        if (!content) return std::nullopt;
        const std::optional<int32_t> id = tokenizer.token_id(*content);
        if (!id) throw std::invalid_argument(std::string(field) + " \"" + *content + "\" is not a token of the tokenizer");
        return id;
      };
      state.bos = resolve("bos_token");
      state.eos = resolve("eos_token");
      if (state.add_bos_token && !state.bos) throw std::invalid_argument("add_bos_token is true but bos_token is missing");
    } catch (const std::invalid_argument& e) {
      throw TokenizerError("tokenizer config '" + config_json.string() + "': " + e.what());
    } catch (const nlohmann::json::exception& e) {
      throw TokenizerError("tokenizer config '" + config_json.string() + "': " + e.what());
    }
  }
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  if (const auto bad = first_invalid_utf8(text)) {
    throw TokenizerError("cannot encode text: invalid UTF-8 at byte offset " + std::to_string(*bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_bos && impl_->add_bos_token) ids.push_back(*impl_->bos);

  thread_local std::vector<AddedVocabulary::Segment> segments;
  thread_local PieceBuffer pieces;
  const bool raw_bytes = impl_->pre_tokenizer.model_sees_raw_bytes();
  impl_->added.split(text, segments);
  for (const AddedVocabulary::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    impl_->pre_tokenizer.run(segment.text, pieces);
    for (const std::string_view piece : pieces.pieces) impl_->model.tokenize(piece, raw_bytes, ids);
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  bool first = true;
  for (const int32_t id : ids) {
    impl_->check_id(id);
    if (skip_special && impl_->special[id]) continue;
    if (!first && impl_->decoder == DecoderKind::JoinWithSpace) bytes.push_back(' ');
    bytes += impl_->decoded_bytes[id];
    first = false;
  }
  return impl_->decoder == DecoderKind::ByteLevel ? utf8_lossy(bytes) : bytes;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->known.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  return impl_->model.token_id(token);
}

const std::string& Tokenizer::token_content(int32_t id) const {
  impl_->check_id(id);
  return impl_->contents[id];
}

bool Tokenizer::is_special(int32_t id) const {
  impl_->check_id(id);
  return impl_->special[id] != 0;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  impl_->check_id(id);
  return impl_->decoded_bytes[id];
}

bool Tokenizer::joins_tokens_with_space() const { return impl_->decoder == DecoderKind::JoinWithSpace; }

}  // namespace dsv4::text
