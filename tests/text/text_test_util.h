// Helpers of the text tests: scratch files and small hand-made tokenizer.json files.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace dsv4::text::testing_util {

// Writes `contents` to a file named after the running test under DSV4_TEST_TMP.
inline std::filesystem::path write_scratch_file(const std::string& name, const std::string& contents) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir =
      std::filesystem::path(DSV4_TEST_TMP) / "text" / (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

// GPT-2's byte-level character of byte `b`, UTF-8 encoded (independent of the code
// under test: printable Latin-1 maps to itself, the rest to U+0100.. in byte order).
inline std::string byte_char(unsigned b) {
  unsigned cp = b;
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  if (!printable) {
    unsigned index = 0;
    for (unsigned x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) ++index;
    }
    cp = 0x100 + index;
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// A byte-level BPE tokenizer.json: every byte is a token whose id is the byte value,
// then one token per merge (ids 256, 257, ... in merge order), then `added_tokens`
// (whose ids the caller gives). ByteLevel is the only pre-tokenizer unless
// `pre_tokenizer` is given.
inline nlohmann::json byte_level_spec(const std::vector<std::pair<std::string, std::string>>& merges,
                                      nlohmann::json added_tokens = nlohmann::json::array(),
                                      nlohmann::json pre_tokenizer = nullptr) {
  nlohmann::json vocab = nlohmann::json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [left, right] : merges) {
    merge_list.push_back(left + " " + right);
    if (!vocab.contains(left + right)) vocab[left + right] = vocab.size();
  }
  if (pre_tokenizer.is_null()) {
    pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  }
  return {{"version", "1.0"},
          {"added_tokens", added_tokens},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}}},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
            {"merges", merge_list}}}};
}

inline nlohmann::json added_token(int id, const std::string& content, bool special, bool normalized = false) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", normalized}, {"special", special}};
}

inline std::string toy_tokenizer_path() { return std::string(DSV4_TEST_DATA) + "/tokenizer/toy_tokenizer.json"; }
inline std::string toy_config_path() { return std::string(DSV4_TEST_DATA) + "/tokenizer/toy_tokenizer_config.json"; }
// The toy tokenizer, loaded once per process.
inline const Tokenizer& toy_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(toy_tokenizer_path(), toy_config_path());
  return tok;
}

}  // namespace dsv4::text::testing_util
