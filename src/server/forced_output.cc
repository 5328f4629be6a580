#include "server/forced_output.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dsv4::server {

void ForcedOutputMask::allowed_tokens(size_t, std::span<const int32_t> context, std::span<uint64_t> allowed) const {
  const size_t at = context.size() - std::min(context.size(), prompt_length_);
  const int32_t token = at < tokens_.size() ? tokens_[at] : eos_;
  std::fill(allowed.begin(), allowed.end(), uint64_t(0));
  if (token >= 0 && size_t(token) < allowed.size() * 64) allow(allowed, size_t(token));
}

ForcedOutputs ForcedOutputs::load(const std::filesystem::path& file, const text::Tokenizer& tokenizer) {
  std::ifstream in(file);
  DSV4_CHECK(in.good(), file.string(), ": cannot read the forced-output file");
  nlohmann::json rules;
  try {
    rules = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(file.string(), ": not JSON: ", e.what()));
  }
  DSV4_CHECK(rules.is_array(), file.string(), ": expected an array of {\"prompt_contains\", \"output\"}");
  ForcedOutputs out;
  for (const auto& r : rules) {
    const auto output = r.is_object() ? r.find("output") : r.end();
    const bool pieces = output != r.end() && output->is_array() &&
                        std::all_of(output->begin(), output->end(), [](const auto& p) { return p.is_string(); });
    DSV4_CHECK(r.is_object() && r.contains("prompt_contains") && r["prompt_contains"].is_string() &&
                   output != r.end() && (output->is_string() || pieces),
               file.string(), ": each rule needs the string \"prompt_contains\" and \"output\", a string or strings, got ",
               r.dump());
    std::vector<int32_t> tokens;
    for (const auto& piece : pieces ? *output : nlohmann::json::array({*output})) {
      const std::vector<int32_t> more = tokenizer.encode(piece.get<std::string>(), false);
      tokens.insert(tokens.end(), more.begin(), more.end());
    }
    out.rules_.push_back({r["prompt_contains"], std::move(tokens)});
  }
  return out;
}

std::unique_ptr<TokenMask> ForcedOutputs::mask_for(const std::string& prompt_text, size_t prompt_length,
                                                   int32_t eos) const {
  for (const Rule& r : rules_)
    if (prompt_text.find(r.prompt_contains) != std::string::npos)
      return std::make_unique<ForcedOutputMask>(r.output, prompt_length, eos);
  return nullptr;
}

}  // namespace dsv4::server
