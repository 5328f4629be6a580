// Single-threaded encode throughput of the tokenizer on a corpus of JSON strings.
//
//   tokenizer_bench TOKENIZER_JSON CORPUS.jsonl
//
// Prints one JSON line with the same fields as the reference's
// (tests/scripts/tokenizer_reference.js bench): MB/s encoding each string on its own,
// and MB/s encoding the corpus in ~64 KB chunks. Best of three runs after a warm-up,
// so that both sides are measured with a warm BPE cache. benchmarks/tokenizer_speed.sh
// runs both side by side.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace {

std::vector<std::string> read_corpus(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read corpus '") + path + "'");
  std::vector<std::string> corpus;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) corpus.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  return corpus;
}

struct Run {
  double seconds;
  size_t tokens;
};

Run encode_all(const dsv4::text::Tokenizer& tokenizer, const std::vector<std::string>& texts) {
  const auto start = std::chrono::steady_clock::now();
  size_t tokens = 0;
  for (const std::string& text : texts) tokens += tokenizer.encode(text, false).size();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), tokens};
}

Run best_of_three(const dsv4::text::Tokenizer& tokenizer, const std::vector<std::string>& texts) {
  Run best = encode_all(tokenizer, texts);
  for (int i = 0; i < 2; ++i) {
    const Run run = encode_all(tokenizer, texts);
    if (run.seconds < best.seconds) best = run;
  }
  return best;
}

size_t total_bytes(const std::vector<std::string>& texts) {
  size_t bytes = 0;
  for (const std::string& text : texts) bytes += text.size();
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON CORPUS.jsonl\n", argv[0]);
    return 2;
  }
  try {
    const auto tokenizer = dsv4::text::Tokenizer::load(argv[1], {});
    const std::vector<std::string> corpus = read_corpus(argv[2]);
    std::vector<std::string> chunks(1);
    for (const std::string& text : corpus) {
      chunks.back() += text;
      chunks.back() += '\n';
      if (chunks.back().size() >= 65536) chunks.emplace_back();
    }
    if (chunks.back().empty()) chunks.pop_back();

    encode_all(tokenizer, corpus);  // warm-up
    const Run per_string = best_of_three(tokenizer, corpus);
    const Run chunked = best_of_three(tokenizer, chunks);
    const double bytes = static_cast<double>(total_bytes(corpus));
    const double chunk_bytes = static_cast<double>(total_bytes(chunks));
    std::printf(
        "{\"strings\": %zu, \"bytes\": %.0f, \"per_string_mb_s\": %.3f, \"per_string_tokens\": %zu, "
        "\"chunks\": %zu, \"chunk_bytes\": %.0f, \"chunked_mb_s\": %.3f}\n",
        corpus.size(), bytes, bytes / per_string.seconds / 1e6, per_string.tokens, chunks.size(), chunk_bytes,
        chunk_bytes / chunked.seconds / 1e6);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
