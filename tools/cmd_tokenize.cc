// `dsv4 tokenize` and `dsv4 detokenize`: the tokenizer on the command line.
//
//   dsv4 tokenize --tokenizer tokenizer.json [--json] < text     -> 1,2,3
//   dsv4 detokenize --tokenizer tokenizer.json --ids 1,2,3        -> text
//
// --jsonl turns either into a batch filter over stdin, one JSON value per line
// (a string to encode / an array of ids to decode) and one result per line; the
// tokenizer conformance test and benchmark drive the library through it.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "text/tokenizer.h"

namespace dsv4::cli {
namespace {

std::string ids_to_csv(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(',');
    out += std::to_string(ids[i]);
  }
  return out;
}

std::vector<int32_t> parse_ids(const std::string& csv) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < csv.size()) {
    size_t end = csv.find(',', pos);
    if (end == std::string::npos) end = csv.size();
    std::string item = csv.substr(pos, end - pos);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      throw std::invalid_argument("--ids: '" + item + "' is not a token id");
    }
    ids.push_back(id);
    pos = end + 1;
  }
  return ids;
}

std::string read_all_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

// One JSON value per input line; `line_number` is 1-based for messages.
template <typename Handle>
void for_each_jsonl_line(Handle&& handle) {
  std::ios::sync_with_stdio(false);
  std::string line;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (line.empty()) continue;
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument("stdin line " + std::to_string(line_number) + ": malformed JSON: " + e.what());
    }
    handle(value, line_number);
  }
}

void run_tokenize(const std::string& tokenizer_path, bool json_output, bool jsonl) {
  const text::Tokenizer tokenizer = text::Tokenizer::load(tokenizer_path, {});
  if (!jsonl) {
    const std::vector<int32_t> ids = tokenizer.encode(read_all_stdin(), /*add_bos=*/false);
    if (json_output) std::cout << nlohmann::json{{"ids", ids}}.dump() << "\n";
    else std::cout << ids_to_csv(ids) << "\n";
    return;
  }
  for_each_jsonl_line([&](const nlohmann::json& value, size_t line_number) {
    if (!value.is_string()) throw std::invalid_argument("stdin line " + std::to_string(line_number) + ": expected a JSON string");
    std::cout << '[' << ids_to_csv(tokenizer.encode(value.get_ref<const std::string&>(), false)) << "]\n";
  });
}

void run_detokenize(const std::string& tokenizer_path, const std::string& ids_csv, bool skip_special, bool jsonl) {
  const text::Tokenizer tokenizer = text::Tokenizer::load(tokenizer_path, {});
  if (!jsonl) {
    std::cout << tokenizer.decode(parse_ids(ids_csv), skip_special);  // the text exactly, no newline added
    return;
  }
  for_each_jsonl_line([&](const nlohmann::json& value, size_t line_number) {
    if (!value.is_array()) throw std::invalid_argument("stdin line " + std::to_string(line_number) + ": expected an array of ids");
    std::vector<int32_t> ids;
    for (const nlohmann::json& id : value) {
      if (!id.is_number_integer()) throw std::invalid_argument("stdin line " + std::to_string(line_number) + ": " + id.dump() + " is not a token id");
      ids.push_back(id.get<int32_t>());
    }
    // Decoded text may carry U+FFFD replacements but is always valid UTF-8.
    std::cout << nlohmann::json(tokenizer.decode(ids, skip_special)).dump() << "\n";
  });
}

}  // namespace

void register_tokenize(CLI::App& app, CommandResult& result) {
  struct Options {
    std::string tokenizer;
    std::string ids;
    bool json = false;
    bool jsonl = false;
    bool skip_special = false;
  };
  auto options = std::make_shared<Options>();

  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of the text on stdin (no BOS)");
  tokenize->add_option("--tokenizer", options->tokenizer, "tokenizer.json")->required();
  tokenize->add_flag("--json", options->json, "Print {\"ids\": [...]} instead of comma-separated ids");
  tokenize->add_flag("--jsonl", options->jsonl, "Batch: one JSON string per stdin line -> one JSON id array per line");
  tokenize->callback([options, &result] {
    run_tokenize(options->tokenizer, options->json, options->jsonl);
    result.exit_code = 0;
  });

  CLI::App* detokenize = app.add_subcommand("detokenize", "Print the text of token ids (exactly, no newline added)");
  detokenize->add_option("--tokenizer", options->tokenizer, "tokenizer.json")->required();
  CLI::Option* ids_option = detokenize->add_option("--ids", options->ids, "Comma-separated token ids");
  detokenize->add_flag("--skip-special", options->skip_special, "Leave out special tokens");
  detokenize->add_flag("--jsonl", options->jsonl, "Batch: one JSON id array per stdin line -> one JSON string per line");
  detokenize->callback([options, ids_option, &result] {
    if (!options->jsonl && ids_option->count() == 0) throw std::invalid_argument("detokenize: --ids is required");
    run_detokenize(options->tokenizer, options->ids, options->skip_special, options->jsonl);
    result.exit_code = 0;
  });
}

}  // namespace dsv4::cli
