// The DSpark drafter through the command line: `dsv4 score` on the golden DSpark checkpoint writes
// every golden tensor under its name and shape, within the golden tests' bounds; `generate` drafts
// with it (fixed K and auto), equal to plain decoding; draft lengths it cannot run are refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

std::string dspark_dir() { return test::data_path("tiny-dspark-a").string(); }

TEST(DSparkCommands, ScoreWritesTheGoldenTensorsWithinTheirBounds) {
  auto golden = TensorStore::open(test::data_path("tiny-dspark-a/golden.safetensors"));
  const std::vector<int64_t> ids = test::read_i64(golden.get("tokens"));
  std::string csv;
  for (size_t i = 0; i < ids.size(); ++i) csv += (i ? "," : "") + std::to_string(ids[i]);
  const std::string out = (test::scratch_dir("dspark-score") / "score.safetensors").string();
  const auto r = test::run_cli("score --model " + dspark_dir() + " --tokens " + csv + " --prompt-len 22 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("DSpark: 3 stages, block 5; 138 steps"), std::string::npos) << r.out;
  auto scored = TensorStore::open(out);
  for (const char* name : {"tokens", "prompt_len", "target.logits", "dspark.main_hidden", "dspark.main_x",
                           "dspark.ring_after_prefill", "dspark.step_pos", "dspark.draft_ids", "dspark.logits",
                           "dspark.base_logits", "dspark.margins", "dspark.confidence", "dspark.head_hidden",
                           "dspark.gate_indices"}) {
    const TensorInfo* got = scored.find(name);
    ASSERT_NE(got, nullptr) << name << " missing";
    EXPECT_EQ(got->shape, golden.get(name).shape) << name;
  }
  EXPECT_EQ(test::read_i64(scored.get("dspark.step_pos")), test::read_i64(golden.get("dspark.step_pos")));
  // The block's logits and the target's against the reference (GoldenDSpark holds every tensor to
  // the data's suggested bounds; here the file is what is under test).
  for (const auto& [name, median] : std::vector<std::pair<const char*, double>>{
           {"target.logits", 0.035}, {"dspark.base_logits", 0.06}, {"dspark.main_x", 0.06}}) {
    const TensorInfo& want = golden.get(name);
    const auto e = test::summarize(test::row_rel_l2(test::read_f32(scored.get(name)), test::read_f32(want),
                                                    want.shape.back()));
    EXPECT_LE(e.median, median) << name;
  }
  // Draft ids: the first draft of each step (its Markov input is the anchor, as the golden's) where
  // the golden's margin is clear (>= 0.25).
  const std::vector<int64_t> got = test::read_i64(scored.get("dspark.draft_ids"));
  const std::vector<int64_t> want = test::read_i64(golden.get("dspark.draft_ids"));
  const std::vector<float> margins = test::read_f32(golden.get("dspark.margins"));
  int64_t clear = 0, same = 0;
  for (size_t j = 0; j < want.size() / 6; ++j) {
    if (margins[j * 5] < 0.25f) continue;
    ++clear;
    same += got[j * 6 + 1] == want[j * 6 + 1];
  }
  ASSERT_GT(clear, 100);
  EXPECT_GE(double(same) / double(clear), 0.97) << same << " of " << clear << " clear first drafts agree";
}

TEST(DSparkCommands, GenerateDraftsFixedAndAutoEqualToPlain) {
  const std::string model = test::mirror_dspark_checkpoint().string();
  auto run = [&](const std::string& draft) {
    const auto r = test::run_cli("generate --model " + model + " --prompt-tokens 0,17,300,5,9 --max-new-tokens 80 "
                                 "--ignore-eos --json" + (draft.empty() ? "" : " --draft " + draft));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const auto plain = run("0");
  EXPECT_EQ(plain["draft_auto"], false);
  for (const std::string draft : {"1", "3", "5", "auto", ""}) {  // (none: the default, auto)
    const auto j = run(draft);
    const bool automatic = draft == "auto" || draft.empty();
    EXPECT_EQ(j["tokens"], plain["tokens"]) << "--draft " << draft;
    EXPECT_EQ(j["drafter"], "DSpark");
    EXPECT_EQ(j["draft_auto"], automatic) << "--draft '" << draft << "'";
    EXPECT_EQ(j["draft"], automatic ? 5 : std::stoi(draft));
    if (!automatic) {
      EXPECT_GT(j["accepted"].get<int64_t>(), 0) << "--draft " << draft;
    } else {
      EXPECT_TRUE(j.contains("verify_scheduler")) << j.dump();
    }
  }
}

TEST(DSparkCommands, RefusesDraftLengthsItCannotRun) {
  const auto beyond = test::run_cli("generate --model " + dspark_dir() + " --prompt-tokens 0,1,2 --draft 6");
  EXPECT_EQ(beyond.exit_code, 1) << beyond.out;
  EXPECT_NE(beyond.out.find("exceeds what the drafter proposes per step (5: its block)"), std::string::npos)
      << beyond.out;
  const auto word = test::run_cli("generate --model " + dspark_dir() + " --prompt-tokens 0,1,2 --draft some");
  EXPECT_NE(word.exit_code, 0);
  EXPECT_NE(word.out.find("--draft 'some' must be 'auto' or a number of drafts between 0 and 15"), std::string::npos)
      << word.out;
}

}  // namespace
}  // namespace dsv4
