#include "text/pretokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "text/byte_level.h"

namespace dsv4::text {
namespace {

// The pattern of Hugging Face's ByteLevel pre-tokenizer when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const nlohmann::json& required(const nlohmann::json& spec, const char* field, const std::string& where) {
  if (!spec.is_object() || !spec.contains(field)) {
    throw std::invalid_argument(where + ": missing field '" + field + "'");
  }
  return spec[field];
}

bool optional_bool(const nlohmann::json& spec, const char* field, bool fallback, const std::string& where) {
  if (!spec.contains(field) || spec[field].is_null()) return fallback;
  if (!spec[field].is_boolean()) throw std::invalid_argument(where + ": field '" + field + "' must be a boolean");
  return spec[field].get<bool>();
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& spec) {
  PreTokenizer result;
  if (!spec.is_null()) append_steps(spec, result.steps_);
  result.ends_with_byte_level_ = !result.steps_.empty() && result.steps_.back().kind == Step::Kind::ByteLevel;
  return result;
}

void PreTokenizer::append_steps(const nlohmann::json& spec, std::vector<Step>& steps) {
  const std::string where = "pre_tokenizer";
  const nlohmann::json& type_field = required(spec, "type", where);
  if (!type_field.is_string()) throw std::invalid_argument(where + ": 'type' must be a string");
  const std::string type = type_field.get<std::string>();
  const std::string here = where + " '" + type + "'";

  if (type == "Sequence") {
    // A nested sequence runs each of its steps over all pieces in turn, which is the
    // same as splicing its steps into the outer one.
    const nlohmann::json& list = required(spec, "pretokenizers", here);
    if (!list.is_array()) throw std::invalid_argument(here + ": 'pretokenizers' must be an array");
    for (const nlohmann::json& child : list) append_steps(child, steps);
    return;
  }
  if (type == "ByteLevel") {
    Step step;
    step.kind = Step::Kind::ByteLevel;
    step.add_prefix_space = optional_bool(spec, "add_prefix_space", true, here);
    step.use_regex = optional_bool(spec, "use_regex", true, here);
    if (step.use_regex) step.regex = Regex(kGpt2Pattern);
    steps.push_back(std::move(step));
    return;
  }
  if (type == "Split") {
    Step step;
    const nlohmann::json& pattern = required(spec, "pattern", here);
    if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.regex = Regex(pattern["Regex"].get<std::string>());
    } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
      step.regex = Regex(regex_escape(pattern["String"].get<std::string>()));
    } else {
      throw std::invalid_argument(here + ": 'pattern' must be {\"Regex\": ...} or {\"String\": ...}");
    }
    const nlohmann::json& behavior = required(spec, "behavior", here);
    const std::string name = behavior.is_string() ? behavior.get<std::string>() : behavior.dump();
    if (name == "Removed") step.behavior = Behavior::Removed;
    else if (name == "Isolated") step.behavior = Behavior::Isolated;
    else if (name == "MergedWithPrevious") step.behavior = Behavior::MergedWithPrevious;
    else if (name == "MergedWithNext") step.behavior = Behavior::MergedWithNext;
    else if (name == "Contiguous") step.behavior = Behavior::Contiguous;
    else throw std::invalid_argument(here + ": unknown behavior " + name);
    step.invert = optional_bool(spec, "invert", false, here);
    steps.push_back(std::move(step));
    return;
  }
  throw std::invalid_argument("unsupported pre_tokenizer type '" + type +
                              "' (supported: Sequence, Split, ByteLevel)");
}

void PreTokenizer::materialize_byte_level(PieceBuffer& buffer) {
  for (std::string_view& piece : buffer.pieces) piece = buffer.storage.emplace_back(byte_level_encode(piece));
  buffer.byte_level_pending = false;
}

void PreTokenizer::run(std::string_view text, PieceBuffer& buffer) const {
  buffer.clear();
  if (!text.empty()) buffer.pieces.push_back(text);
  for (const Step& step : steps_) {
    // A step after ByteLevel must see the mapped characters, as in the reference.
    if (buffer.byte_level_pending) materialize_byte_level(buffer);
    if (step.kind == Step::Kind::ByteLevel && step.add_prefix_space) {
      for (std::string_view& piece : buffer.pieces) {
        if (!piece.empty() && piece.front() == ' ') continue;
        std::string& prefixed = buffer.storage.emplace_back();
        prefixed.reserve(piece.size() + 1);
        prefixed.push_back(' ');
        prefixed.append(piece);
        piece = prefixed;
      }
    }
    if (step.kind == Step::Kind::Split || step.use_regex) {
      const Behavior behavior = step.kind == Step::Kind::Split ? step.behavior : Behavior::Isolated;
      buffer.scratch.clear();
      std::swap(buffer.scratch, buffer.pieces);
      for (const std::string_view piece : buffer.scratch) split_piece(piece, step.regex, behavior, step.invert, buffer);
    }
    if (step.kind == Step::Kind::ByteLevel) buffer.byte_level_pending = true;
  }
}

void PreTokenizer::split_piece(std::string_view piece, const Regex& regex, Behavior behavior, bool invert,
                               PieceBuffer& buffer) {
  // Matches and the gaps between them, as the reference's Pattern::find_matches.
  auto& spans = buffer.spans;
  spans.clear();
  regex.find_all(piece, buffer.matches);
  size_t previous = 0;
  for (const auto& [begin, end] : buffer.matches) {
    if (previous != begin) spans.push_back({previous, begin, invert});
    spans.push_back({begin, end, !invert});
    previous = end;
  }
  if (previous != piece.size()) spans.push_back({previous, piece.size(), invert});

  // Combine spans according to the delimiter behaviour (NormalizedString::split).
  auto& out = buffer.pieces;
  const auto emit = [&](size_t begin, size_t end) {
    if (end > begin) out.push_back(piece.substr(begin, end - begin));  // empty pieces are dropped
  };
  switch (behavior) {
    case Behavior::Isolated:
      for (const auto& span : spans) emit(span.begin, span.end);
      break;
    case Behavior::Removed:
      for (const auto& span : spans) {
        if (!span.is_match) emit(span.begin, span.end);
      }
      break;
    case Behavior::Contiguous:
    case Behavior::MergedWithPrevious: {
      std::vector<std::pair<size_t, size_t>> merged;
      bool previous_match = false;
      for (const auto& span : spans) {
        const bool join = behavior == Behavior::Contiguous ? span.is_match == previous_match
                                                           : span.is_match && !previous_match;
        if (join && !merged.empty()) merged.back().second = span.end;
        else merged.emplace_back(span.begin, span.end);
        previous_match = span.is_match;
      }
      for (const auto& [begin, end] : merged) emit(begin, end);
      break;
    }
    case Behavior::MergedWithNext: {
      std::vector<std::pair<size_t, size_t>> merged;
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) merged.back().first = it->begin;
        else merged.emplace_back(it->begin, it->end);
        previous_match = it->is_match;
      }
      for (auto it = merged.rbegin(); it != merged.rend(); ++it) emit(it->first, it->second);
      break;
    }
  }
}

}  // namespace dsv4::text
