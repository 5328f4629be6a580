// What a newcomer meets first: the errors of a wrong path, too little memory, a port in use, a
// misspelled option or command, text without a tokenizer — each with its message, saying what
// would work — and the progress lines of a long wait, drawn on a terminal (a pseudo-terminal made
// by `script`) and never into a pipe.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "support/test_support.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

const fs::path& tiny_checkpoint() {
  static const fs::path dir = [] {
    const fs::path out = test::scratch_dir("newcomer-" + std::to_string(::getpid())) / "ckpt";
    auto r = test::run_cli("make-checkpoint --preset tiny --seed 2 --quiet --out " + out.string());
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return out;
  }();
  return dir;
}

std::string tokens(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(3 + i % 200);
  return s;
}

TEST(Newcomer, APathThatIsNotACheckpointSaysWhatItIsAndWhereCheckpointsAre) {
  const fs::path ckpt = tiny_checkpoint();
  auto missing = test::run_cli("generate --model " + (ckpt.parent_path() / "nowhere").string() + " --prompt-tokens 1,2");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("nowhere: no such directory"), std::string::npos) << missing.out;
  // The parent of a checkpoint (a download folder): no config.json, and the checkpoint below it named.
  auto parent = test::run_cli("generate --model " + ckpt.parent_path().string() + " --prompt-tokens 1,2");
  EXPECT_NE(parent.exit_code, 0);
  EXPECT_NE(parent.out.find("not a checkpoint (no config.json"), std::string::npos) << parent.out;
  EXPECT_NE(parent.out.find("checkpoints below it: " + ckpt.string()), std::string::npos) << parent.out;
  auto file = test::run_cli("generate --model " + (ckpt / "config.json").string() + " --prompt-tokens 1,2");
  EXPECT_NE(file.out.find("config.json: not a directory"), std::string::npos) << file.out;
}

TEST(Newcomer, WeightsThatDoNotFitSayWhatItNeedsAndWhatWouldFit) {
  const fs::path ckpt = tiny_checkpoint();
  const std::string run = "generate --model " + ckpt.string() + " --prompt-tokens 1,2 --max-new-tokens 2";
  // --weights memory with less memory than the weights: refused, naming both sizes and --weights mapped.
  auto copy = test::run_shell("DSV4_MEMORY_AVAILABLE=100000 " + std::string(DSV4_CLI) + " " + run + " --weights memory");
  EXPECT_NE(copy.exit_code, 0);
  EXPECT_NE(copy.out.find("--weights memory needs 7."), std::string::npos) << copy.out;
  EXPECT_NE(copy.out.find("0.1 MB are available; --weights mapped"), std::string::npos) << copy.out;
  // auto: read in place, and said so; the run goes on.
  auto in_place = test::run_shell("DSV4_MEMORY_AVAILABLE=6000000 " + std::string(DSV4_CLI) + " " + run +
                                  " --max-context 64 --prefill-chunk 1");
  EXPECT_EQ(in_place.exit_code, 0) << in_place.out;
  EXPECT_NE(in_place.out.find("note: the weights (7."), std::string::npos) << in_place.out;
  EXPECT_NE(in_place.out.find("read in place from the page cache (--weights mapped)"), std::string::npos);
  // A context whose cache does not fit: the message names the --max-context that does, and it does.
  auto context = test::run_shell("DSV4_MEMORY_AVAILABLE=4700000 " + std::string(DSV4_CLI) + " " + run +
                                 " --weights mapped --max-context 512 --prefill-chunk 1");
  EXPECT_NE(context.exit_code, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(context.out, m, std::regex("--max-context (\\d+) fits"))) << context.out;
  const int fits = std::stoi(m[1]);
  EXPECT_GT(fits, 2);
  EXPECT_LT(fits, 512);
  auto fitted = test::run_shell("DSV4_MEMORY_AVAILABLE=4700000 " + std::string(DSV4_CLI) + " " + run +
                                " --weights mapped --prefill-chunk 1 --max-context " + std::to_string(fits));
  EXPECT_EQ(fitted.exit_code, 0) << fitted.out;
  auto one_more = test::run_shell("DSV4_MEMORY_AVAILABLE=4700000 " + std::string(DSV4_CLI) + " " + run +
                                  " --weights mapped --prefill-chunk 1 --max-context " + std::to_string(fits + 1));
  EXPECT_NE(one_more.exit_code, 0) << one_more.out;  // the largest that fits, not a guess below it
}

TEST(Newcomer, APortInUseIsNamedWithTheWayOut) {
  // Hold a port the way another server would.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  auto r = test::run_cli("serve --model " + tiny_checkpoint().string() + " --port " + std::to_string(port));
  ::close(fd);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("cannot listen on 127.0.0.1:" + std::to_string(port) + ": port " + std::to_string(port) +
                       " is in use"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--port 0 for any free one"), std::string::npos) << r.out;
}

TEST(Newcomer, AMisspelledOptionOrCommandGetsTheOneMeant) {
  auto option = test::run_cli("generate --model x --prompt-tokens 1 --drafts 2");
  EXPECT_NE(option.exit_code, 0);
  EXPECT_NE(option.out.find("dsv4 generate: unknown option --drafts; did you mean --draft?"), std::string::npos)
      << option.out;
  auto longer = test::run_cli("serve --model x --max-sequence 4");
  EXPECT_NE(longer.out.find("did you mean --max-sequences?"), std::string::npos) << longer.out;
  auto command = test::run_cli("generat --model x");
  EXPECT_NE(command.exit_code, 0);
  EXPECT_NE(command.out.find("unknown command 'generat'; did you mean 'generate'?"), std::string::npos) << command.out;
  // Nothing close: CLI11's own message, and the list of options.
  auto far = test::run_cli("generate --model x --prompt-tokens 1 --zzzzzzzz");
  EXPECT_NE(far.exit_code, 0);
  EXPECT_NE(far.out.find("unknown option --zzzzzzzz\n"), std::string::npos) << far.out;
}

TEST(Newcomer, TextWithoutATokenizerSaysHowToGetOne) {
  auto r = test::run_cli("generate --model " + tiny_checkpoint().string() + " --prompt hello");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("no tokenizer.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--prompt-tokens"), std::string::npos) << r.out;
}

// Under a pseudo-terminal: the opening's and the prefill's progress; into a pipe, or with
// --quiet, none. (The prompt of 96 tokens in chunks of 8 takes 12 steps; the line is redrawn at
// most ten times a second, so a fast run shows its first chunk and its end.)
TEST(Newcomer, ProgressIsDrawnOnATerminalOnly) {
  if (test::run_shell("command -v script").exit_code != 0) GTEST_SKIP() << "no `script` (util-linux)";
  const std::string cmd = std::string(DSV4_CLI) + " generate --model " + tiny_checkpoint().string() +
                          " --prompt-tokens " + tokens(96) + " --prefill-chunk 8 --max-new-tokens 2";
  auto tty = test::run_shell("script -qec '" + cmd + "' /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.out;
  EXPECT_NE(tty.out.find("copying the weights into memory: "), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("prefill: 8 tokens of 96 tokens"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("prefill: 96 tokens in "), std::string::npos) << tty.out;  // its last line
  auto pipe = test::run_shell("(" + cmd + ") 2>&1 | cat");
  ASSERT_EQ(pipe.exit_code, 0) << pipe.out;
  EXPECT_EQ(pipe.out.find("tokens of 96"), std::string::npos) << pipe.out;
  EXPECT_EQ(pipe.out.find("prefill: 96 tokens in"), std::string::npos) << pipe.out;
  EXPECT_EQ(pipe.out.find("copying the weights"), std::string::npos) << pipe.out;
  auto quiet = test::run_shell("script -qec '" + cmd + " --quiet' /dev/null");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.out;
  EXPECT_EQ(quiet.out.find("tokens of 96"), std::string::npos) << quiet.out;
  EXPECT_EQ(quiet.out.find("copying the weights"), std::string::npos) << quiet.out;
}

}  // namespace
}  // namespace dsv4
