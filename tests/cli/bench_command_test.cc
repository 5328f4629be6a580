// `dsv4 bench --json` on the tiny checkpoint: every figure the report promises is there and
// consistent (a smoke test of the plumbing; the figures themselves are measured at real
// dimensions, outside the tests).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace dsv4 {
namespace {

void expect_step(const nlohmann::json& s, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(s.is_object());
  EXPECT_GT(s.at("ms").get<double>(), 0.0);
  EXPECT_GT(s.at("weight_bytes").get<int64_t>(), 0);
  EXPECT_EQ(s.at("bytes").get<int64_t>(), s.at("weight_bytes").get<int64_t>() + s.at("cache_bytes").get<int64_t>());
  const double gbs = s.at("bytes").get<double>() / (s.at("ms").get<double>() * 1e-3) / 1e9;
  EXPECT_NEAR(s.at("gbs").get<double>(), gbs, 1e-6 * gbs);
  EXPECT_GT(s.at("fraction_of_bandwidth").get<double>(), 0.0);
}

TEST(BenchCommand, JsonHasEveryFigure) {
  auto r = test::run_cli("bench --model " + test::tiny_a_dir().string() +
                         " --context 80 --reps 2 --e2e-tokens 12 --e2e-prompt 8 --e2e-rounds 2 --bandwidth-gib 0.0625"
                         " --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GT(j.at("mem_bandwidth_gbs").get<double>(), 0.0);
  expect_step(j.at("draft_step"), "draft_step");
  EXPECT_FALSE(j.contains("draft_step_vocab32k"));  // tiny-a's vocabulary is under 32768 rows
  // The draft step with rounded copies of the BF16 head: the head's bytes halve, then halve again.
  expect_step(j.at("draft_step_fp8_head"), "draft_step_fp8_head");
  expect_step(j.at("draft_step_int4_head"), "draft_step_int4_head");
  const int64_t full = j.at("draft_step").at("weight_bytes"), fp8 = j.at("draft_step_fp8_head").at("weight_bytes"),
                int4 = j.at("draft_step_int4_head").at("weight_bytes");
  EXPECT_LT(fp8, full);
  EXPECT_LT(int4, fp8);
  EXPECT_TRUE(j.contains("speedup_model_int4_head"));
  for (const char* kind : {"window", "csa", "hca", "mtp_block", "head", "checkpoint"})
    expect_step(j.at("decode_step").at(kind), std::string("decode_step.") + kind);
  for (const char* kind : {"window", "csa", "hca", "mtp_block", "head"})
    for (const char* n : {"2", "3", "4", "8"}) EXPECT_GT(j.at("verify_ratio").at(kind).at(n).get<double>(), 0.0);
  for (const char* kind : {"window", "csa", "hca", "mtp_block"})
    EXPECT_GT(j.at("verify_ratio_same_experts").at(kind).at("4").get<double>(), 0.0);
  // The cache each layer holds after the prefill, within the bound its geometry gives.
  const auto& cache = j.at("cache");
  ASSERT_EQ(cache.size(), 4u);  // tiny-a: window, CSA, HCA, CSA
  for (const auto& l : cache) {
    EXPECT_GT(l.at("bytes_held").get<int64_t>(), 0) << l;
    EXPECT_LE(l.at("bytes_held").get<int64_t>(), l.at("bound_bytes").get<int64_t>()) << l;
  }
  EXPECT_EQ(cache[0].at("bytes_per_token").get<double>(), 0.0);  // window only: nothing grows
  EXPECT_GT(cache[1].at("bytes_per_token").get<double>(), cache[2].at("bytes_per_token").get<double>());
  // 43 layers of the V4-Flash pattern, 4 acceptance rates × 4 draft lengths.
  const auto& sm = j.at("speedup_model");
  int64_t layers = 0;
  for (auto& [ratio, count] : sm.at("layers").items()) layers += count.get<int64_t>();
  EXPECT_EQ(layers, 43);
  EXPECT_EQ(sm.at("points").size(), 16u);
  const auto& runs = j.at("end_to_end").at("runs");
  ASSERT_EQ(runs.size(), 6u);  // k = 0..4, then auto
  // auto: the verify lengths it chose (one count per step) and the costs it learned.
  const auto& automatic = runs[5];
  EXPECT_TRUE(automatic.at("auto").get<bool>());
  int64_t steps = 0;
  for (auto& n : automatic.at("verified_drafts_histogram")) steps += n.get<int64_t>();
  EXPECT_GT(steps, 0);
  EXPECT_GE(automatic.at("cost_model").at("pass_ms_by_rows").size(), 2u);
  for (size_t k = 0; k + 1 < runs.size(); ++k) {
    SCOPED_TRACE("k = " + std::to_string(k));
    EXPECT_EQ(runs[k].at("k").get<int>(), int(k));
    EXPECT_GT(runs[k].at("tokens_per_s").get<double>(), 0.0);
    EXPECT_EQ(runs[k].at("round_tokens_per_s").size(), 2u);
    EXPECT_EQ(runs[k].at("acceptance_by_position").size(), k);
    if (k == 0) continue;
    for (const char* m : {"model_this_checkpoint", "model_full"}) {
      const auto& p = runs[k].at(m);
      // E = 1 + the sum of the measured acceptance by position.
      double e = 1;
      for (auto& a : runs[k].at("acceptance_by_position")) e += a.get<double>();
      EXPECT_NEAR(p.at("tokens_per_step").get<double>(), e, 1e-9) << m;
      EXPECT_GT(p.at("step_ms").get<double>(), 0.0) << m;
      EXPECT_GE(p.at("recompute_ms").get<double>(), 0.0) << m;
      EXPECT_GT(p.at("speedup").get<double>(), 0.0) << m;
    }
  }
}

TEST(BenchCommand, RejectsAContextWithinTheWindow) {
  auto r = test::run_cli("bench --model " + test::tiny_a_dir().string() + " --context 4");
  // Exit 1 with run_model_bench's own message: a crash (another status) or another error does not pass.
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("bench: context 4 must exceed the window"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace dsv4
