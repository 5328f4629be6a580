// The real DeepSeek-V4-Pro dimensions (hidden 7168, 128 heads in 16 output groups, q_lora_rank 1536,
// index top-k 1024, experts of 3072), shrunk to fit a test machine: one layer (ratio 128, hash-routed,
// as Pro's first), 8 experts, a 4096-token vocabulary (~1.5 GB). It is written, inspected as V4-Pro,
// and decodes with its MTP, speculative greedy equal to plain.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace dsv4 {
namespace {

TEST(V4ProCli, AOneLayerShrunkV4ProLoadsInspectsAndDecodes) {
  const auto dir = test::scratch_dir("v4-pro-1-layer");
  auto r = test::run_cli("make-checkpoint --quiet --preset v4-pro --layers 1 --set n_routed_experts=8 --set "
                         "vocab_size=4096 --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = test::run_cli("inspect " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("model: DeepSeek-V4-Pro's dimensions, 1 of its 61 layers, 8 of its 384 experts"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hidden 7168, 1 layers + 1 MTP, 128 heads x 512"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HCA (ratio 128):                [0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hash-routed:                    [0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status: complete"), std::string::npos) << r.out;

  std::vector<int32_t> tokens[2];
  for (int k : {0, 2}) {
    r = test::run_cli("generate --quiet --json --ignore-eos --weights mapped --model " + dir.string() +
                      " --prompt-tokens 5,9,200,3000,17,4095,1 --max-new-tokens 12 --draft " + std::to_string(k) +
                      " 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    tokens[k / 2] = j["tokens"].get<std::vector<int32_t>>();
    ASSERT_EQ(tokens[k / 2].size(), 12u);
    if (k) {
      EXPECT_GT(j["drafted"].get<int64_t>(), 0);
    }
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  std::filesystem::remove_all(dir);  // (1.5 GB)
}

}  // namespace
}  // namespace dsv4
