// generate / chat --json-schema FILE and --grammar FILE on a tiny checkpoint with the toy
// tokenizer: the output is JSON valid against the schema (plain and speculative decoding), a
// budget that cuts it is reported, and bad files fail at once with the file and the problem named.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace dsv4::cli_grammar_test {
namespace {

struct Files {
  std::filesystem::path checkpoint, dir;
};

const Files& files() {
  static const Files f = [] {
    namespace fs = std::filesystem;
    const std::string pid = std::to_string(::getpid());  // ctest runs the cases in parallel processes
    Files out;
    out.dir = test::scratch_dir("grammar-options-" + pid);
    fs::copy_file(test::data_path("tokenizer/toy_tokenizer.json"), out.dir / "tokenizer.json");
    fs::copy_file(test::data_path("tokenizer/toy_tokenizer_config.json"), out.dir / "tokenizer_config.json");
    out.checkpoint = out.dir / "ckpt";
    auto r = test::run_cli("make-checkpoint --preset tiny --seed 4 --quiet --out " + out.checkpoint.string() +
                           " --tokenizer " + (out.dir / "tokenizer.json").string());
    EXPECT_EQ(r.exit_code, 0) << r.out;
    auto write = [&](const char* name, const std::string& text) { std::ofstream(out.dir / name) << text; };
    write("person.json", R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
      "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items": {"enum": ["a", "b"]},
      "maxItems": 3}}, "required": ["name", "age"], "additionalProperties": false})");
    write("yes_no.gbnf", "root ::= \"yes\" | \"no\"\n");
    write("unsupported.json", R"({"type": "object", "patternProperties": {"^x": {}}})");
    write("broken.json", R"({"type": "object", )");
    write("broken.gbnf", "root ::= \"a\" missing-rule\n");
    return out;
  }();
  return f;
}

std::string generate(const std::string& args) {
  return "generate --model " + files().checkpoint.string() + " --prompt 'hello world' " + args;
}
std::string file(const char* name) { return (files().dir / name).string(); }

void expect_person(const nlohmann::json& j) {
  ASSERT_TRUE(j.is_object()) << j.dump();
  ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << j.dump();
  ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << j.dump();
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 120);
  for (const auto& [k, v] : j.items()) EXPECT_TRUE(k == "name" || k == "age" || k == "tags") << k;
  if (j.contains("tags")) {
    EXPECT_LE(j["tags"].size(), 3u);
    for (const auto& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b") << j.dump();
  }
}

TEST(GrammarOptions, GenerateFollowsAJsonSchema) {
  for (const std::string extra : {"", " --draft 2", " --temperature 1 --seed 5 --draft 2"}) {
    auto r = test::run_cli(generate("--json-schema " + file("person.json") + " --max-new-tokens 300 --json" + extra));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto out = nlohmann::json::parse(r.out);
    EXPECT_TRUE(out["grammar_complete"].get<bool>()) << r.out;
    expect_person(nlohmann::json::parse(out["text"].get<std::string>()));
    // The masks' cost is reported: one mask per generated token at least (drafts add theirs).
    EXPECT_GE(out["grammar_masks"].get<int64_t>(), int64_t(out["tokens"].size())) << r.out;
    EXPECT_GT(out["grammar_mask_us_mean"].get<double>(), 0.0);
    EXPECT_LE(out["grammar_mask_us_median"].get<double>(), out["grammar_mask_us_p99"].get<double>());
    EXPECT_LE(out["grammar_mask_us_mean"].get<double>(), out["grammar_mask_us_max"].get<double>());
  }
  // Plain output: the JSON text, then a newline.
  auto plain = test::run_shell("(" + std::string(DSV4_CLI) + " " + generate("--json-schema " + file("person.json")) +
                               " --max-new-tokens 300 2>/dev/null)");
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  expect_person(nlohmann::json::parse(plain.out));
}

TEST(GrammarOptions, GenerateFollowsAGbnfGrammarAlsoFromTokenIds) {
  auto r = test::run_cli(generate("--grammar " + file("yes_no.gbnf") + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string text = nlohmann::json::parse(r.out)["text"];
  EXPECT_TRUE(text == "yes" || text == "no") << text;
  auto ids = test::run_cli("generate --model " + files().checkpoint.string() +
                           " --prompt-tokens 5,6,7 --prompt-tokens 9 --grammar " + file("yes_no.gbnf") + " --json");
  ASSERT_EQ(ids.exit_code, 0) << ids.out;
  EXPECT_EQ(nlohmann::json::parse(ids.out)["grammar_complete"], nlohmann::json::parse("[true, true]")) << ids.out;
}

TEST(GrammarOptions, ABudgetThatCutsTheGrammarIsReported) {
  auto r = test::run_cli(generate("--json-schema " + file("person.json") + " --max-new-tokens 3 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("before it completed the grammar of " + file("person.json")), std::string::npos) << r.out;
  const auto out = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_FALSE(out["grammar_complete"].get<bool>());
}

TEST(GrammarOptions, BadFilesFailAtOnceNamingTheFileAndTheProblem) {
  const std::pair<std::string, std::string> cases[] = {
      {"--json-schema " + file("missing.json"), "missing.json: cannot read the JSON Schema (no such file)"},
      {"--json-schema " + file("broken.json"), "broken.json: not JSON"},
      {"--json-schema " + file("unsupported.json"), "unsupported.json: unsupported JSON Schema keyword 'patternProperties'"},
      {"--grammar " + file("broken.gbnf"), "broken.gbnf: grammar: rule 'root' (line 1) refers to undefined rule 'missing-rule'"},
      {"--grammar " + files().dir.string(), ": cannot read the grammar (not a file)"},
      {"--grammar " + file("yes_no.gbnf") + " --ignore-eos", "--ignore-eos cannot be combined"},
      {"--grammar " + file("yes_no.gbnf") + " --json-schema " + file("person.json"), "--json-schema excludes --grammar"},
  };
  for (const auto& [args, message] : cases) {
    auto r = test::run_cli(generate(args));
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("terminate"), std::string::npos) << r.out;  // no crash
  }
}

TEST(GrammarOptions, ChatRepliesFollowTheSchemaEveryTurn) {
  auto r = test::run_shell("printf 'hello\\nagain\\n' | " + std::string(DSV4_CLI) + " chat --model " +
                           files().checkpoint.string() + " --max-new-tokens 300 --json-schema " + file("person.json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  size_t at = 0;
  int replies = 0;
  while ((at = r.out.find("[answer] ", at)) != std::string::npos) {
    at += 9;
    const size_t end = r.out.find("\n>>> ", at);
    ASSERT_NE(end, std::string::npos) << r.out;
    expect_person(nlohmann::json::parse(r.out.substr(at, end - at)));
    ++replies;
  }
  EXPECT_EQ(replies, 2) << r.out;
  auto bad = test::run_shell("echo hi | " + std::string(DSV4_CLI) + " chat --model " + files().checkpoint.string() +
                             " --grammar " + file("broken.gbnf"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("broken.gbnf: "), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace dsv4::cli_grammar_test
