#include "token_args.h"

#include <charconv>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace dsv4::cli {

namespace {
int32_t parse_id(std::string_view s, const std::string& where) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  DSV4_CHECK(!s.empty() && ec == std::errc() && p == s.data() + s.size() && v >= 0 && v <= INT32_MAX,
             where, ": '", std::string(s), "' is not a token id");
  return int32_t(v);
}
}  // namespace

std::vector<int32_t> parse_token_list(const std::string& text) {
  DSV4_CHECK(text.find_first_not_of(" \t") != std::string::npos, "empty token list (an empty prompt?)");
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    ids.push_back(parse_id(std::string_view(text).substr(start, end - start), "token list"));
    start = end + 1;
  }
  return ids;
}

std::vector<int32_t> read_token_file(const std::string& path) {
  std::ifstream file;
  if (path != "-") file.open(path);
  std::istream& in = path == "-" ? std::cin : file;
  DSV4_CHECK(in.good(), path, ": cannot read");
  std::vector<int32_t> ids;
  std::string line;
  // Ids separated by newlines, spaces or commas (one per line, or `--prompt-tokens`' list).
  for (int n = 1; std::getline(in, line); ++n) {
    for (char& ch : line)
      if (ch == ',' || ch == '\t' || ch == '\r') ch = ' ';
    std::istringstream words(line);
    for (std::string word; words >> word;) ids.push_back(parse_id(word, path + ":" + std::to_string(n)));
  }
  return ids;
}

std::string read_text_file(const std::string& path) {
  std::ifstream file;
  if (path != "-") file.open(path, std::ios::binary);
  std::istream& in = path == "-" ? std::cin : file;
  DSV4_CHECK(in.good(), path, ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i)
    DSV4_CHECK(ids[i] < vocab, what, ": token id ", ids[i], " (entry ", i, ") is outside the vocabulary (",
               vocab, " tokens)");
}

std::string join_tokens(const std::vector<int32_t>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace dsv4::cli
