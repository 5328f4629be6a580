// Parsing token-id arguments of the command line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsv4::cli {

// "1,2,3" → ids; throws naming the offending entry.
std::vector<int32_t> parse_token_list(const std::string& text);
// One id per line (blank lines ignored); "-" reads standard input.
std::vector<int32_t> read_token_file(const std::string& path);
// A whole file as text (bytes as they are); "-" reads standard input.
std::string read_text_file(const std::string& path);
// Every id within [0, vocab); throws naming the first one outside.
void check_token_ids(const std::vector<int32_t>& ids, int64_t vocab, const std::string& what);
std::string join_tokens(const std::vector<int32_t>& ids, const char* sep = ",");

}  // namespace dsv4::cli
