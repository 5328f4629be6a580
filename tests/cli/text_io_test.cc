// Text in, text out on a tiny checkpoint with a real (hand-made) tokenizer: generate
// --prompt streams text, chat holds a multi-turn conversation read from stdin and prints
// acceptance statistics on exit, and both fail clearly without a tokenizer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace dsv4 {
namespace {

std::filesystem::path demo_checkpoint() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    // Per process: ctest runs the cases of this file in parallel processes.
    const std::string pid = std::to_string(::getpid());
    const fs::path tok = test::scratch_dir("toy-tokenizer-" + pid);
    fs::copy_file(test::data_path("tokenizer/toy_tokenizer.json"), tok / "tokenizer.json");
    fs::copy_file(test::data_path("tokenizer/toy_tokenizer_config.json"), tok / "tokenizer_config.json");
    const fs::path out = test::scratch_dir("text-demo-" + pid);
    auto r = test::run_cli("make-checkpoint --preset tiny --seed 4 --quiet --out " + out.string() + " --tokenizer " +
                           (tok / "tokenizer.json").string());
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return out;
  }();
  return dir;
}

TEST(TextIo, MakeCheckpointSizesTheVocabularyFromTheTokenizer) {
  const auto dir = demo_checkpoint();
  EXPECT_TRUE(std::filesystem::exists(dir / "tokenizer.json"));
  EXPECT_TRUE(std::filesystem::exists(dir / "tokenizer_config.json"));
  auto r = test::run_cli("inspect --json " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto ids = test::run_shell("echo hello | " + std::string(DSV4_CLI) + " tokenize --tokenizer " +
                             (dir / "tokenizer.json").string() + " --json");
  ASSERT_EQ(ids.exit_code, 0) << ids.out;
  EXPECT_FALSE(nlohmann::json::parse(ids.out)["ids"].empty());
}

TEST(TextIo, GeneratePromptStreamsTheDecodedText) {
  const auto dir = demo_checkpoint();
  auto j = test::run_cli("generate --model " + dir.string() +
                         " --prompt 'hello world' --max-new-tokens 12 --draft 2 --ignore-eos --json");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  auto out = nlohmann::json::parse(j.out);
  ASSERT_EQ(out["tokens"].size(), 12u);
  // The streamed text is the decoded tokens (special tokens skipped).
  std::string ids;
  for (auto& t : out["tokens"]) ids += (ids.empty() ? "" : ",") + std::to_string(t.get<int>());
  auto detok = test::run_cli("detokenize --skip-special --tokenizer " + (dir / "tokenizer.json").string() + " --ids " + ids);
  ASSERT_EQ(detok.exit_code, 0) << detok.out;
  EXPECT_EQ(out["text"].get<std::string>(), detok.out);
  // Plain text mode prints the same text on stdout.
  auto plain = test::run_shell("(" + std::string(DSV4_CLI) + " generate --model " + dir.string() +
                               " --prompt 'hello world' --max-new-tokens 12 --ignore-eos 2>/dev/null)");
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.out, out["text"].get<std::string>() + "\n");
}

// chat --kv-cache-dir keeps the conversation on disk after every reply; --resume goes on with it
// in another run, prefilling only the new turn, and answers as one run holding all the turns.
TEST(TextIo, ChatResumesAConversationKeptOnDisk) {
  const auto dir = demo_checkpoint();
  const auto kv = test::scratch_dir("chat-kv-" + std::to_string(::getpid()));
  const std::string chat = std::string(DSV4_CLI) + " chat --model " + dir.string() + " --draft 2 --max-new-tokens 10";
  auto answers = [](const std::string& out) {
    std::vector<std::string> a;
    for (size_t at = 0; (at = out.find("[answer] ", at)) != std::string::npos; at += 9)
      a.push_back(out.substr(at + 9, out.find('\n', at) - at - 9));
    return a;
  };
  auto prefilled = [](const std::string& out) {
    const size_t at = out.find(" prompt tokens prefilled");
    EXPECT_NE(at, std::string::npos) << out;
    return at == std::string::npos ? -1 : std::stoll(out.substr(out.rfind(", ", at) + 2));
  };
  auto whole = test::run_shell("printf 'hello\\nhow are you\\nand then\\n' | " + chat);
  ASSERT_EQ(whole.exit_code, 0) << whole.out;
  auto first = test::run_shell("printf 'hello\\nhow are you\\n' | " + chat + " --kv-cache-dir " + kv.string());
  ASSERT_EQ(first.exit_code, 0) << first.out;
  auto resumed = test::run_shell("printf 'and then\\n' | " + chat + " --kv-cache-dir " + kv.string() + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("(resuming a conversation of 4 messages"), std::string::npos) << resumed.out;
  ASSERT_EQ(answers(whole.out).size(), 3u) << whole.out;
  ASSERT_EQ(answers(resumed.out).size(), 1u) << resumed.out;
  EXPECT_EQ(answers(resumed.out)[0], answers(whole.out)[2]);
  EXPECT_LE(prefilled(resumed.out), 12) << "only the new turn: " << resumed.out;
  // A new conversation that begins as the kept one reuses it too (all but its prompt's last token).
  auto again = test::run_shell("printf 'hello\\n' | " + chat + " --kv-cache-dir " + kv.string());
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(prefilled(again.out), 1) << again.out;
  EXPECT_EQ(answers(again.out)[0], answers(whole.out)[0]);
  // Nothing kept: --resume says so.
  auto none = test::run_shell("printf 'x\\n' | " + chat + " --kv-cache-dir " + (kv / "empty").string() + " --resume");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.out.find("no conversation kept here"), std::string::npos) << none.out;
}

TEST(TextIo, ChatReadsTurnsFromStdin) {
  const auto dir = demo_checkpoint();
  auto r = test::run_shell("printf 'hello\\nhow are you\\n/clear\\nagain\\n' | " + std::string(DSV4_CLI) +
                           " chat --model " + dir.string() + " --draft 2 --max-new-tokens 10");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  size_t answers = 0;
  for (size_t at = 0; (at = r.out.find("[answer]", at)) != std::string::npos; ++at) ++answers;
  EXPECT_EQ(answers, 3u) << r.out;
  EXPECT_NE(r.out.find("(conversation cleared)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 turns"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("speculative decoding (MTP, k = 2): drafted"), std::string::npos) << r.out;
  // The conversation is kept between turns: the second turn prefills its own tokens (and the
  // first reply's last token, and an end-of-sentence token if the reply was cut), not the whole
  // conversation again; /clear starts a fresh one.
  auto count = [&](const std::string& text) {
    auto ids = test::run_shell("printf '%s' '" + text + "' | " + std::string(DSV4_CLI) + " tokenize --json --tokenizer " +
                               (dir / "tokenizer.json").string());
    EXPECT_EQ(ids.exit_code, 0) << ids.out;
    return int64_t(nlohmann::json::parse(ids.out)["ids"].size());
  };
  const int64_t turns = count("<｜begin▁of▁sentence｜><｜User｜>hello<｜Assistant｜></think>") +
                        count("<｜User｜>how are you<｜Assistant｜></think>") + 1 +
                        count("<｜begin▁of▁sentence｜><｜User｜>again<｜Assistant｜></think>");
  const size_t at = r.out.find(" prompt tokens prefilled");
  ASSERT_NE(at, std::string::npos) << r.out;
  const int64_t prefilled = std::stoll(r.out.substr(r.out.rfind(", ", at) + 2));
  EXPECT_GE(prefilled, turns) << r.out;
  EXPECT_LE(prefilled, turns + 1) << r.out;

  auto thinking = test::run_shell("printf 'why\\n' | " + std::string(DSV4_CLI) + " chat --thinking --model " +
                                  dir.string() + " --max-new-tokens 8");
  ASSERT_EQ(thinking.exit_code, 0) << thinking.out;
  EXPECT_NE(thinking.out.find("[thinking]"), std::string::npos) << thinking.out;
}

// A long first turn (many lines: one message, not one turn per line) from a file or all of stdin;
// --max-context bounds the conversation.
TEST(TextIo, ChatTakesTheFirstTurnFromAFile) {
  const auto dir = demo_checkpoint();
  const auto file = test::scratch_dir("chat-prompt-file-" + std::to_string(::getpid())) / "doc.txt";
  {
    std::ofstream f(file);
    for (int i = 0; i < 40; ++i) f << "hello world line " << i << "\n";
  }
  const std::string chat = std::string(DSV4_CLI) + " chat --model " + dir.string() + " --max-new-tokens 6";
  auto r = test::run_shell("printf 'again\\n' | " + chat + " --prompt-file " + file.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(file.string() + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 turns"), std::string::npos) << r.out;
  auto piped = test::run_shell("cat " + file.string() + " | " + chat + " --prompt-file -");
  ASSERT_EQ(piped.exit_code, 0) << piped.out;
  EXPECT_NE(piped.out.find("1 turns"), std::string::npos) << piped.out;
  // The same first reply either way.
  const auto first_answer = [](const std::string& out) {
    const size_t at = out.find("[answer]");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
  };
  EXPECT_FALSE(first_answer(r.out).empty()) << r.out;
  EXPECT_EQ(first_answer(r.out), first_answer(piped.out));
  auto small = test::run_shell("cat " + file.string() + " | " + chat + " --prompt-file - --max-context 64");
  EXPECT_EQ(small.exit_code, 1) << small.out;
  EXPECT_NE(small.out.find("chat: the conversation"), std::string::npos) << small.out;
}

TEST(TextIo, TextNeedsTheCheckpointsTokenizer) {
  auto r = test::run_cli("generate --model " + test::tiny_a_dir().string() + " --prompt hello");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("tokenizer.json"), std::string::npos) << r.out;
  auto chat = test::run_shell("echo hi | " + std::string(DSV4_CLI) + " chat --model " + test::tiny_a_dir().string());
  EXPECT_EQ(chat.exit_code, 1);
  EXPECT_NE(chat.out.find("tokenizer.json"), std::string::npos) << chat.out;
}

}  // namespace
}  // namespace dsv4
