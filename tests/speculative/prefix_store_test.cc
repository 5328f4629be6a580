// The prefix cache's disk tier (prefix_store.h): a state written and read back by another store
// (a restart) continues exactly as the state it was; files that are truncated, bit-flipped, of
// another format version or of another checkpoint are skipped with a log line and removed, never
// used; another checkpoint's files in a shared directory are left alone; a directory that cannot
// be written logs and the store goes on; the byte budget removes the least recently used.
#include <gtest/gtest.h>

#include <fstream>

#include "speculative/prefix_cache.h"
#include "speculative/prefix_store.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

struct Logged {
  std::vector<std::string> lines;
  PrefixStore::Log log() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
};

SequenceState kept_state(SpeculativeDecoder& decoder, const std::vector<int32_t>& prompt) {
  GenerateOptions o;
  o.max_new_tokens = 10;
  o.draft_tokens = 2;
  o.keep_state = o.reusable = true;
  const auto id = decoder.add(prompt, o);
  while (!decoder.finished(id)) decoder.step();
  SequenceState s = decoder.take_state(id);
  decoder.release(id);
  return s;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = test::scratch_dir("prefix_store") / name;
  fs::remove_all(dir);
  return dir;
}

std::vector<fs::path> kv_files(const fs::path& dir) {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path());
  return v;
}

// Generation from a state (cut at `cut`) against cold, on a fresh decoder each.
std::vector<int32_t> continue_from(Engine& engine, const std::vector<int32_t>& prompt, const SequenceState* from,
                                   int64_t cut, int64_t* prefilled) {
  SpeculativeDecoder decoder(*engine.target, engine.proposer.get());
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.draft_tokens = 2;
  o.sampling.temperature = 0.8f;
  o.sampling.seed = 4;
  const auto id = from ? decoder.add(prompt, o, PrefixSource{from->tokens, from->cache.get(), from->draft.get()}, cut)
                       : decoder.add(prompt, o);
  while (!decoder.finished(id)) decoder.step();
  if (prefilled) *prefilled = decoder.metrics().prefill_rows;
  return decoder.release(id).tokens;
}

TEST(PrefixStore, AStateReadBackAfterARestartContinuesExactly) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const fs::path dir = fresh_dir("restart");
  const uint64_t id = engine->files->identity();
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  SequenceState kept = kept_state(decoder, test::random_prompt(300, V, 21));
  Logged log;
  {
    PrefixStore store({dir, id, int64_t(1) << 30, 100}, decoder, log.log());
    store.save(kept, "test");
    EXPECT_EQ(store.saves(), 1);
    store.save(kept, "test");  // already there
    EXPECT_EQ(store.saves(), 1);
    EXPECT_EQ(store.files(), 1u);
  }
  PrefixStore again({dir, id, int64_t(1) << 30, 100}, decoder, log.log());
  ASSERT_EQ(again.files(), 1u);
  std::vector<int32_t> prompt = kept.tokens;
  for (int32_t t : test::random_prompt(25, V, 22)) prompt.push_back(t);
  EXPECT_EQ(again.best_cut(prompt), kept.length());
  std::optional<SequenceState> loaded = again.load_best(prompt);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(again.loads(), 1);
  EXPECT_EQ(loaded->tokens, kept.tokens);
  ASSERT_TRUE(loaded->draft);
  int64_t prefilled = 0;
  const auto warm = continue_from(*engine, prompt, &*loaded, kept.length(), &prefilled);
  EXPECT_EQ(prefilled, int64_t(prompt.size()) - kept.length());
  EXPECT_EQ(warm, continue_from(*engine, prompt, nullptr, 0, nullptr));
  // Cut in the middle too.
  std::vector<int32_t> shorter(kept.tokens.begin(), kept.tokens.begin() + 150);
  for (int32_t t : test::random_prompt(10, V, 23)) shorter.push_back(t);
  EXPECT_EQ(continue_from(*engine, shorter, &*loaded, 149, nullptr), continue_from(*engine, shorter, nullptr, 0, nullptr));
  EXPECT_TRUE(log.lines.empty());
}

TEST(PrefixStore, BadFilesAreSkippedLoggedAndRemovedNeverUsed) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const uint64_t id = engine->files->identity();
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  SequenceState kept = kept_state(decoder, test::random_prompt(200, V, 31));
  std::vector<int32_t> prompt = kept.tokens;
  prompt.push_back(7);
  // Each fault on its own copy of a good file.
  auto damaged = [&](const std::string& name, const std::function<void(const fs::path&)>& damage, bool at_index) {
    SCOPED_TRACE(name);
    const fs::path dir = fresh_dir(name);
    Logged log;
    {
      PrefixStore store({dir, id, int64_t(1) << 30, 100}, decoder, log.log());
      store.save(kept, "test");
    }
    ASSERT_EQ(kv_files(dir).size(), 1u);
    damage(kv_files(dir)[0]);
    PrefixStore store({dir, id, int64_t(1) << 30, 100}, decoder, log.log());
    if (at_index) {
      EXPECT_EQ(store.files(), 0u);
    } else {
      EXPECT_EQ(store.files(), 1u);
      EXPECT_GT(store.best_cut(prompt), 0);
      EXPECT_FALSE(store.load_best(prompt));
      EXPECT_EQ(store.files(), 0u);
    }
    EXPECT_EQ(store.failures(), 1);
    ASSERT_EQ(log.lines.size(), 1u);
    EXPECT_NE(log.lines[0].find(dir.string()), std::string::npos) << log.lines[0];
    EXPECT_TRUE(kv_files(dir).empty()) << "removed";
  };
  auto patch = [](const fs::path& p, size_t offset, uint8_t x) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(offset));
    char c;
    f.read(&c, 1);
    c = char(uint8_t(c) ^ x);
    f.seekp(std::streamoff(offset));
    f.write(&c, 1);
  };
  damaged("truncated", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) / 2); }, false);
  damaged("bit_flipped", [&](const fs::path& p) { patch(p, fs::file_size(p) / 2, 0x10); }, false);
  damaged("other_version", [&](const fs::path& p) { patch(p, 8, 0x02); }, true);
  damaged("other_checkpoint", [&](const fs::path& p) { patch(p, 16, 0x01); }, true);
  damaged("checksum_cut", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 3); }, false);
}

// A conversation's next turn supersedes the file of the one before (which it shares but for the
// last tokens generated there); a state that shares less is kept beside it.
TEST(PrefixStore, ANextTurnReplacesTheFileOfThePreviousOne) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const uint64_t id = engine->files->identity();
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  const SequenceState first = kept_state(decoder, test::random_prompt(150, V, 51));
  std::vector<int32_t> next(first.tokens.begin(), first.tokens.end() - 3);  // the client resent other last tokens
  for (int32_t t : test::random_prompt(40, V, 52)) next.push_back(t);
  const SequenceState second = kept_state(decoder, next);
  std::vector<int32_t> other(first.tokens.begin(), first.tokens.begin() + 100);
  for (int32_t t : test::random_prompt(80, V, 53)) other.push_back(t);
  const SequenceState third = kept_state(decoder, other);
  Logged log;
  PrefixStore store({fresh_dir("turns"), id, int64_t(1) << 30, 100}, decoder, log.log());
  store.save(first, "test");
  store.save(second, "test");
  EXPECT_EQ(store.files(), 1u);
  EXPECT_EQ(store.best_cut(first.tokens), int64_t(first.tokens.size()) - 4);  // all the second shares with it
  store.save(third, "test");
  EXPECT_EQ(store.files(), 2u);
  EXPECT_EQ(store.best_cut(next), int64_t(next.size()) - 1);
}

TEST(PrefixStore, ADirectorySharedByTwoCheckpointsAndOneThatCannotBeWritten) {
  auto engine = Engine::open(test::mirror_checkpoint(), {test::test_backend(), true, 0, 16});
  const int64_t V = engine->config().vocab_size;
  const uint64_t id = engine->files->identity();
  SpeculativeDecoder decoder(*engine->target, engine->proposer.get());
  const SequenceState a = kept_state(decoder, test::random_prompt(150, V, 41));
  const SequenceState b = kept_state(decoder, test::random_prompt(160, V, 42));
  const fs::path dir = fresh_dir("shared");
  Logged log;
  {
    PrefixStore mine({dir, id, int64_t(1) << 30, 100}, decoder, log.log());
    PrefixStore other({dir, id ^ 1, int64_t(1) << 30, 100}, decoder, log.log());  // another checkpoint's server
    mine.save(a, "test");
    other.save(b, "test");
  }
  PrefixStore mine({dir, id, int64_t(1) << 30, 100}, decoder, log.log());
  PrefixStore other({dir, id ^ 1, int64_t(1) << 30, 100}, decoder, log.log());
  EXPECT_EQ(mine.files(), 1u);
  EXPECT_EQ(other.files(), 1u);
  EXPECT_EQ(kv_files(dir).size(), 2u) << "neither removes the other's";
  EXPECT_EQ(mine.best_cut(b.tokens), 0);
  EXPECT_TRUE(log.lines.empty());

  // The byte budget: a second state over it removes the older one.
  const fs::path small = fresh_dir("budget");
  {
    PrefixStore store({small, id, int64_t(1) << 30, 100}, decoder, log.log());
    store.save(a, "test");
  }
  const int64_t one = int64_t(fs::file_size(kv_files(small)[0]));
  PrefixStore store({small, id, one + one / 2, 100}, decoder, log.log());
  store.save(b, "test");
  EXPECT_EQ(store.files(), 1u);
  EXPECT_EQ(store.best_cut(a.tokens), 0);
  EXPECT_GT(store.best_cut(b.tokens), 0);
  // Shorter than the minimum: not written.
  PrefixStore picky({fresh_dir("picky"), id, int64_t(1) << 30, 1000}, decoder, log.log());
  picky.save(a, "test");
  EXPECT_EQ(picky.files(), 0u);

  // A directory that cannot be written (here: gone, a file in its place): a log line, no throw.
  const fs::path broken = fresh_dir("broken");
  PrefixStore lost({broken, id, int64_t(1) << 30, 100}, decoder, log.log());
  fs::remove_all(broken);
  std::ofstream(broken) << "not a directory";
  log.lines.clear();
  lost.save(a, "test");
  EXPECT_EQ(lost.files(), 0u);
  EXPECT_EQ(lost.failures(), 1);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("not written"), std::string::npos) << log.lines[0];
  fs::remove(broken);
}

}  // namespace
}  // namespace dsv4
