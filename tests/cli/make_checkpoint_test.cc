// `dsv4 make-checkpoint`: deterministic output, the options, and weights quantized
// exactly as the release format stores them. Tiny presets only (fast).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/number_formats.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Runs make-checkpoint into a fresh scratch dir; returns the dir.
fs::path make(const std::string& name, const std::string& args) {
  const fs::path dir = test::scratch_dir(name);
  const auto r = test::run_cli("make-checkpoint --quiet --out " + dir.string() + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return dir;
}

std::string dir_bytes(const fs::path& dir) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string all;
  for (auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    all += f.filename().string() + ":" + std::string(std::istreambuf_iterator<char>(in), {});
  }
  return all;
}

json inspect_json(const fs::path& dir, int expect_code = 0) {
  const auto r = test::run_shell(std::string("(") + DSV4_CLI + " inspect --json " + dir.string() + " 2>/dev/null)");
  EXPECT_EQ(r.exit_code, expect_code) << r.out;
  return json::parse(r.out);
}

TEST(MakeCheckpointCli, TinyIsDeterministicAndComplete) {
  const fs::path a = make("mk_seed5_a", "--preset tiny --seed 5");
  const fs::path b = make("mk_seed5_b", "--preset tiny --seed 5 --threads 1");
  const fs::path c = make("mk_seed6", "--preset tiny --seed 6");
  EXPECT_TRUE(dir_bytes(a) == dir_bytes(b)) << "same seed, different bytes";
  EXPECT_FALSE(dir_bytes(a) == dir_bytes(c)) << "different seeds, same bytes";

  const auto r = test::run_cli("inspect " + a.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("MTP: present"), std::string::npos) << r.out;
  const json report = inspect_json(a);
  EXPECT_TRUE(report["complete"].get<bool>());
  EXPECT_GE(report["shards"].get<int>(), 2);
  EXPECT_EQ(report["config"], load_config(test::tiny_a_dir() / "config.json").to_json());
}

TEST(MakeCheckpointCli, NoMtp) {
  const fs::path dir = make("mk_no_mtp", "--preset tiny --seed 1 --no-mtp");
  const auto r = test::run_cli("inspect " + dir.string());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("MTP: absent (the checkpoint has no mtp.0.enorm.weight)"), std::string::npos) << r.out;
  const json report = inspect_json(dir);
  EXPECT_FALSE(report["mtp_present"].get<bool>());
  EXPECT_EQ(report["config"]["num_nextn_predict_layers"], 1);
  // Groups are "embed", "layers.N", "head", "mtp.N" (model/weights.cc): a present one proves the loop checks something.
  ASSERT_TRUE(report["group_bytes"].contains("layers.0")) << report["group_bytes"].dump();
  for (auto& [name, shard] : report["group_bytes"].items()) EXPECT_EQ(name.rfind("mtp.", 0), std::string::npos);
}

TEST(MakeCheckpointCli, RatiosAndOverrides) {
  const fs::path dir = make("mk_ratios", "--preset tiny --seed 2 --ratios 4,0,128,128");
  json report = inspect_json(dir);
  EXPECT_EQ(report["config"]["compress_ratios"], json::array({4, 0, 128, 128, 0}));
  EXPECT_EQ(report["config"]["num_hidden_layers"], 4);
  EXPECT_EQ(report["layers"]["csa"], json::array({0}));
  EXPECT_EQ(report["layers"]["window"], json::array({1}));
  EXPECT_EQ(report["layers"]["hca"], json::array({2, 3}));

  const fs::path set = make("mk_set", "--preset tiny --seed 2 --layers 2 --set sliding_window=8 --set num_attention_heads=8 "
                                      "--set n_routed_experts=16 --set vocab_size=512");
  report = inspect_json(set);
  const json& c = report["config"];
  EXPECT_EQ(c["sliding_window"], 8);
  EXPECT_EQ(c["num_attention_heads"], 8);
  EXPECT_EQ(c["n_routed_experts"], 16);
  EXPECT_EQ(c["vocab_size"], 512);
  EXPECT_EQ(c["compress_ratios"], json::array({0, 4, 0}));
  EXPECT_TRUE(report["complete"].get<bool>());

  // Invalid combinations fail with the config's message naming the key.
  const fs::path bad = test::scratch_dir("mk_bad");
  auto r = test::run_cli("make-checkpoint --preset tiny --out " + bad.string() + " --set hidden_size=200");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128);
  EXPECT_NE(r.out.find("hidden_size"), std::string::npos) << r.out;
  r = test::run_cli("make-checkpoint --preset tiny --out " + bad.string() + " --set num_attention_heads=3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("num_attention_heads"), std::string::npos) << r.out;
  r = test::run_cli("make-checkpoint --preset tiny --out " + bad.string() + " --set no_such_key=1");
  EXPECT_NE(r.out.find("'no_such_key' is not a configuration key"), std::string::npos) << r.out;
  r = test::run_cli("make-checkpoint --preset tiny --out " + bad.string() + " --perturb 0.5");
  EXPECT_NE(r.out.find("aligned and mirror presets only"), std::string::npos) << r.out;
  r = test::run_cli("make-checkpoint --preset nope --out " + bad.string());
  EXPECT_NE(r.out.find("unknown preset 'nope'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(bad / "config.json"));
}

// Every FP8 tile: a power-of-two E8M0 scale, codes within +-448 (no NaN code), and the tile's
// largest code above 224 (scale = 2^ceil(log2(amax/448))). Every FP4 block: its largest
// |code| at least 3 (amax/scale in (3, 6]).
TEST(MakeCheckpointCli, QuantizedAsTheReleaseFormat) {
  const fs::path dir = make("mk_quant", "--preset tiny --seed 9");
  const TensorStore s = TensorStore::open(dir);
  int fp8_tiles = 0, fp4_blocks = 0;
  for (const TensorInfo* t : s.all()) {
    if (!t->name.ends_with(".weight")) continue;
    const std::string prefix = t->name.substr(0, t->name.size() - 7);
    if (t->dtype == DType::F8_E4M3) {
      const TensorInfo& sc = s.get(prefix + ".scale");
      const int64_t rows = t->shape[0], cols = t->shape[1], tiles_c = sc.shape[1];
      for (int64_t tr = 0; tr < sc.shape[0]; ++tr)
        for (int64_t tc = 0; tc < tiles_c; ++tc) {
          ASSERT_NE(sc.data[tr * tiles_c + tc], 0xFF) << t->name;
          float max_code = 0;
          for (int64_t r = tr * 128; r < std::min(rows, tr * 128 + 128); ++r)
            for (int64_t c = tc * 128; c < std::min(cols, tc * 128 + 128); ++c) {
              const uint8_t code = t->data[r * cols + c];
              ASSERT_NE(code & 0x7F, 0x7F) << t->name;
              max_code = std::max(max_code, std::fabs(e4m3_to_f32(code)));
            }
          ASSERT_LE(max_code, 448.0f);
          ASSERT_GT(max_code, 224.0f) << t->name << " tile " << tr << "," << tc;
          ++fp8_tiles;
        }
    } else if (t->dtype == DType::I8) {
      const TensorInfo& sc = s.get(prefix + ".scale");
      const int64_t rows = t->shape[0], cols = t->shape[1] * 2;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < cols / 32; ++b) {
          ASSERT_NE(sc.data[r * (cols / 32) + b], 0xFF);
          float max_code = 0;
          for (int64_t c = b * 32; c < b * 32 + 32; ++c)
            max_code = std::max(max_code, std::fabs(fp4_packed_at(t->data + r * (cols / 2), c)));
          ASSERT_GE(max_code, 3.0f) << t->name;
          ++fp4_blocks;
        }
    }
  }
  EXPECT_GT(fp8_tiles, 100);
  EXPECT_GT(fp4_blocks, 10000);
}

TEST(MakeCheckpointCli, AlignedPreset) {
  const fs::path dir = make("mk_aligned", "--preset aligned --seed 4");
  EXPECT_TRUE(inspect_json(dir)["complete"].get<bool>());
  const TensorStore s = TensorStore::open(dir);
  int64_t zeros = 0;  // counted, so that renamed tensors cannot leave the check with nothing to check
  for (const TensorInfo* t : s.all()) {
    const std::string& n = t->name;
    const bool zero = n.ends_with("attn.wo_b.weight") || n.ends_with("shared_experts.w2.weight") ||
                      (n.find(".experts.") != std::string::npos && n.ends_with(".w2.weight")) ||
                      n == "mtp.0.h_proj.weight";
    if (!zero) continue;
    ++zeros;
    for (size_t i = 0; i < t->nbytes; ++i) ASSERT_EQ(t->data[i], 0) << n;
  }
  EXPECT_GT(zeros, 0);
  const TensorInfo& e = s.get("mtp.0.e_proj.weight");
  const int64_t D = e.shape[0];
  for (int64_t i = 0; i < D; ++i)
    for (int64_t j = 0; j < D; ++j) ASSERT_EQ(e.data[i * D + j], i == j ? 0x38 : 0x00);  // e4m3 1.0
  const TensorInfo& es = s.get("mtp.0.e_proj.scale");
  for (size_t i = 0; i < es.nbytes; ++i) EXPECT_EQ(es.data[i], 127);  // 2^0

  const fs::path noisy = make("mk_aligned_perturb", "--preset aligned --seed 4 --perturb 1");
  EXPECT_TRUE(inspect_json(noisy)["complete"].get<bool>());
  EXPECT_NE(dir_bytes(dir), dir_bytes(noisy));
}

}  // namespace
}  // namespace dsv4
